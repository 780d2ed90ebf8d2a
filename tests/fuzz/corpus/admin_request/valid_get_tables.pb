
user_0
item_0m