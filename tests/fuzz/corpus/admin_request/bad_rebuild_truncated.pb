
item