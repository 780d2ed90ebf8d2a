
item_1