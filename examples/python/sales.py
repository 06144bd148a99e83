"""A till's sales through tilldb's Python package: one transaction of a few sales, a read, a
lazy scan that sums them, a rolled-back transaction that leaves nothing behind, and close.

    pip install ./python
    python examples/python/sales.py ./sales-db

python/tests/test_tilldb.py runs it (scripts/test) and checks what it prints.
"""

import sys

import tilldb

SALES = [
    ("coffee", 250),
    ("tea", 180),
    ("croissant", 320),
    ("coffee", 250),
    ("orange juice", 400),
]


def main(argv):
    if len(argv) != 2:
        print(f"usage: {argv[0]} DIR", file=sys.stderr)
        return 2
    with tilldb.open(argv[1]) as db:
        # One transaction: every sale or none. It commits ("sync": durable when the block
        # ends) unless the block raises.
        with db.begin() as txn:
            for number, (item, cents) in enumerate(SALES, start=1):
                txn.put(f"sale-{number:04}".encode(), f"{item};{cents}".encode(), table="sales")

        assert db.get(b"sale-0003", table="sales") == b"croissant;320"

        # A transaction that raises is rolled back: nothing of it remains.
        try:
            with db.begin() as txn:
                txn.put(b"sale-0006", b"refund;-250", table="sales")
                raise RuntimeError("the card was declined")
        except RuntimeError:
            pass
        assert db.get(b"sale-0006", table="sales") is None

        # A lazy scan, in key order: one snapshot, read a batch at a time.
        total = 0
        count = 0
        for key, value in db.scan(table="sales"):
            item, cents = value.decode().split(";")
            print(f"{key.decode()}  {item:<14} {int(cents) / 100:6.2f}")
            total += int(cents)
            count += 1
        print(f"ok: {count} sales, total {total / 100:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
