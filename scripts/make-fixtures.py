#!/usr/bin/env python3
"""Regenerates Fixtures/products.json, customers.json and orders.jsonl (fixed seed).

The data is our own, made up here: a small shop with products, customers and orders that
refer to both. Run from the repository root: python3 scripts/make-fixtures.py
"""
import json
import random
from datetime import date, timedelta

rng = random.Random(20261121)

BRANDS = ["Acme", "Globex", "Initech", "Umbrella", "Hooli", "Stark", "Wayne", "Wonka", "Tyrell", "Cyberdyne",
          "Soylent", "Vandelay", "Pied Piper", "Aperture", "Black Mesa"]
CATEGORIES = ["audio", "books", "cameras", "garden", "kitchen", "laptops", "lighting", "office", "outdoor",
              "phones", "sports", "toys", "tools", "travel", "wearables"]
NOUNS = ["Kettle", "Lamp", "Headphones", "Backpack", "Notebook", "Drill", "Tent", "Watch", "Speaker", "Mug",
         "Charger", "Camera", "Blender", "Chair", "Bottle", "Router", "Keyboard", "Jacket", "Drone", "Puzzle"]
ADJECTIVES = ["Compact", "Deluxe", "Classic", "Smart", "Rugged", "Silent", "Solar", "Wireless", "Mini", "Pro"]
FIRST = ["Ada", "Björn", "Chloé", "Dmitri", "Eun-ji", "Farah", "Giulia", "Hiro", "Ines", "Jonas", "Kwame", "Lena",
         "Mateo", "Nadia", "Oskar", "Priya", "Quentin", "Rosa", "Søren", "Tariq", "Uma", "Viktor", "Wen", "Yara", "Zoë"]
LAST = ["Okafor", "Lindqvist", "Dubois", "Petrov", "Kim", "Haddad", "Rossi", "Tanaka", "García", "Weber",
        "Mensah", "Novak", "Silva", "Nowak", "O'Brien", "Sharma", "Moreau", "Costa", "Jensen", "Khan"]
CITIES = [("Lisbon", "PT"), ("Oslo", "NO"), ("Lyon", "FR"), ("Kraków", "PL"), ("Osaka", "JP"), ("Austin", "US"),
          ("Accra", "GH"), ("Porto Alegre", "BR"), ("Montréal", "CA"), ("Zürich", "CH"), ("Pune", "IN"), ("Cork", "IE")]
STREETS = ["Main St", "Rua Augusta", "Karl Johans gate", "Rue de la République", "ul. Floriańska", "Elm Avenue"]
STATUSES = ["pending", "paid", "shipped", "delivered", "cancelled"]

start = date(2024, 1, 1)

products = []
for i in range(1, 301):
    brand = rng.choice(BRANDS)
    noun = rng.choice(NOUNS)
    name = f"{brand} {rng.choice(ADJECTIVES)} {noun}"
    product = {
        "object": f"prod-{i:04d}",
        "name": name,
        "brand": brand,
        "category": rng.choice(CATEGORIES),
        "price": round(rng.uniform(2, 900), 2) if rng.random() < 0.8 else rng.randint(5, 500),
        "quantity": rng.randint(0, 250),
        "sku": f"{brand[:3].upper()}-{rng.randint(10000, 99999)}-{i:04d}",
        "created": (start + timedelta(days=rng.randint(0, 600))).isoformat(),
        "description": f"The {name.lower()} for everyday use, {rng.choice(['light', 'sturdy', 'quiet', 'fast'])} and {rng.choice(['affordable', 'repairable', 'stylish', 'efficient'])}.",
        "tags": sorted(rng.sample(["new", "sale", "eco", "bestseller", "gift", "limited", "refurbished"], rng.randint(0, 3))),
    }
    if rng.random() < 0.15:
        product["discontinued"] = True
    products.append(product)

customers = []
for i in range(1, 151):
    first, last = rng.choice(FIRST), rng.choice(LAST)
    city, country = rng.choice(CITIES)
    customer = {
        "object": f"cust-{i:04d}",
        "name": f"{first} {last}",
        "email": f"{first.lower()}.{last.lower().replace(' ', '').replace(chr(39), '')}{i}@example.com",
        "address": {"street": f"{rng.randint(1, 250)} {rng.choice(STREETS)}", "city": city, "country": country},
        "vip": rng.random() < 0.2,
        "since": (start + timedelta(days=rng.randint(0, 700))).isoformat(),
    }
    if rng.random() < 0.3:
        customer["phone"] = f"+{rng.randint(1, 99)} {rng.randint(100, 999)} {rng.randint(1000, 9999)}"
    customers.append(customer)

orders = []
for i in range(1, 601):
    customer = rng.choice(customers)
    lines = []
    for product in rng.sample(products, rng.randint(1, 4)):
        qty = rng.randint(1, 3)
        lines.append({"product": product["object"], "qty": qty, "price": product["price"]})
    total = round(sum(l["qty"] * l["price"] for l in lines), 2)
    orders.append({
        "object": f"ord-{i:05d}",
        "customer": customer["object"],
        "status": rng.choice(STATUSES),
        "items": lines,
        "total": total,
        "placed": (start + timedelta(days=rng.randint(0, 700), hours=rng.randint(0, 23))).isoformat(),
        "shipping": {"method": rng.choice(["standard", "express", "pickup"]), "city": customer["address"]["city"]},
    })

with open("Fixtures/products.json", "w", encoding="utf-8") as f:
    json.dump(products, f, ensure_ascii=False, indent=1)
    f.write("\n")
with open("Fixtures/customers.json", "w", encoding="utf-8") as f:
    json.dump(customers, f, ensure_ascii=False, indent=1)
    f.write("\n")
with open("Fixtures/orders.jsonl", "w", encoding="utf-8") as f:
    for order in orders:
        f.write(json.dumps(order, ensure_ascii=False, separators=(",", ":")) + "\n")
