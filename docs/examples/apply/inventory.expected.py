"""A small stock ledger: items, quantities and a reorder report."""
import json


class Inventory:
    def __init__(self, path):
        self.path = path
        self.items = {}

    def load(self):
        with open(self.path) as f:
            self.items = json.load(f)
        return len(self.items)

    def add(self, name, count):
        if count <= 0:
            raise ValueError("count must be positive")
        self.items[name] = self.items.get(name, 0) + count

    def remove(self, name, count):
        left = self.items.get(name, 0) - count
        if left < 0:
            raise ValueError(f"only {self.items.get(name, 0)} of {name} in stock")
        self.items[name] = left

    def low_stock(self, limit):
        return sorted(name for name, count in self.items.items() if count < limit)

    def save(self):
        with open(self.path, "w") as f:
            json.dump(self.items, f, indent=2, sort_keys=True)
