"""Structured-extraction domains scored by the `structured` verifier (JSON Schema + fields).

The generators write a short document (a contact note, an invoice) from drawn facts; the task
holds the JSON Schema, the expected values, and for invoices the reconciliation rules that the
extracted numbers must satisfy (each line's quantity x unit price = amount; amounts sum to total).
"""

from __future__ import annotations

import json
import random

from flywheel.domains.domain import Domain
from flywheel.domains.registry import register_domain

FIRST = ["Maria", "Wei", "Amara", "Jonas", "Priya", "Tomás", "Keiko", "Olu", "Sara", "Dmitri"]
LAST = ["Lopez", "Chen", "Okafor", "Berg", "Raman", "Silva", "Tanaka", "Adeyemi", "Novak", "Ivanov"]
COMPANIES = ["Acme Corp", "Blue Finch Ltd", "Northwind", "Umbra Labs", "Keystone GmbH"]
CITIES = ["Denver", "Lagos", "Osaka", "Porto", "Tallinn", "Pune"]
ITEMS = ["USB cable", "desk lamp", "notebook", "monitor stand", "coffee beans", "stapler", "headset"]


class ExtractionDomain(Domain):
    verifier = "structured"
    max_new_tokens = 32
    required_fields = ("task_id", "prompt", "schema", "expected")

    def demonstration(self, task: dict, rng: random.Random) -> str:
        return "```json\n" + json.dumps(task["expected"]) + "\n```"

    def task(self, document: str, schema: dict, expected: dict, **more) -> dict:
        prompt = (f"Extract the fields as JSON matching this schema:\n{json.dumps(schema)}\n\n"
                  f"Document:\n{document}")
        return {"prompt": prompt, "schema": schema, "expected": expected,
                "answer": json.dumps(expected), **more}


@register_domain
class UserExtraction(ExtractionDomain):
    name = "extraction"
    description = "your own extraction tasks (--tasks FILE: prompt, schema, expected, reconcile)"

    def task_count(self) -> int | None:
        return 0


CONTACT_SCHEMA = {
    "type": "object", "additionalProperties": False,
    "required": ["name", "email", "phone", "company", "city"],
    "properties": {k: {"type": "string"} for k in ("name", "email", "phone", "company", "city")},
}


@register_domain
class Contact(ExtractionDomain):
    name = "extract_contact"
    description = "a person's name, email, phone, company and city from a short note"

    def sample_task(self, rng: random.Random) -> dict:
        first, last = rng.choice(FIRST), rng.choice(LAST)
        fields = {"name": f"{first} {last}", "email": f"{first.lower()}.{last.lower()}@example.org",
                  "phone": f"+1-555-{rng.randint(0, 9999):04d}", "company": rng.choice(COMPANIES),
                  "city": rng.choice(CITIES)}
        document = rng.choice([
            "Please reach {name} at {email} or {phone}; they work at {company} in {city}.",
            "{company} ({city}) contact: {name}. Phone {phone}, mail {email}.",
            "Met {name} from {company} today. Based in {city}. {email} / {phone}.",
        ]).format(**fields)
        return self.task(document, CONTACT_SCHEMA, fields)


ITEM_SCHEMA = {"type": "object", "required": ["description", "quantity", "unit_price", "amount"],
               "properties": {"description": {"type": "string"}, "quantity": {"type": "integer"},
                              "unit_price": {"type": "number"}, "amount": {"type": "number"}}}
INVOICE_SCHEMA = {
    "type": "object", "required": ["invoice_number", "vendor", "line_items", "total"],
    "properties": {"invoice_number": {"type": "string"}, "vendor": {"type": "string"},
                   "line_items": {"type": "array", "items": ITEM_SCHEMA, "minItems": 1},
                   "total": {"type": "number"}},
}
RECONCILE = [{"each": "line_items", "product": ["quantity", "unit_price"], "equals": "amount"},
             {"sum": "line_items[].amount", "equals": "total"}]


@register_domain
class Invoice(ExtractionDomain):
    name = "extract_invoice"
    description = "invoice number, vendor, line items and total; the numbers must reconcile"

    def sample_task(self, rng: random.Random) -> dict:
        lines = []
        for item in rng.sample(ITEMS, rng.randint(1, 3)):
            qty, price = rng.randint(1, 9), rng.randint(100, 9999) / 100
            lines.append({"description": item, "quantity": qty, "unit_price": price,
                          "amount": round(qty * price, 2)})
        total = round(sum(x["amount"] for x in lines), 2)
        number, vendor = f"INV-{rng.randint(1000, 9999)}", rng.choice(COMPANIES)
        rows = "\n".join(f"  {x['description']:<14} {x['quantity']} x {x['unit_price']:.2f} = "
                         f"{x['amount']:.2f}" for x in lines)
        document = f"{vendor}\nInvoice {number}\n{rows}\nTOTAL DUE: {total:.2f}"
        expected = {"invoice_number": number, "vendor": vendor, "line_items": lines, "total": total}
        return self.task(document, INVOICE_SCHEMA, expected, reconcile=RECONCILE)
