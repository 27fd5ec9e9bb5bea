"""Word statistics of a text file."""
import re
from collections import Counter

WORD = re.compile(r"[A-Za-z']+")


def words(text):
    return [w.lower() for w in WORD.findall(text)]


def top_words(path, n=10, stop=()):
    with open(path, encoding="utf-8") as f:
        counts = Counter(w for w in words(f.read()) if w not in stop)
    return counts.most_common(n)


def mean_length(path):
    with open(path, encoding="utf-8") as f:
        ws = words(f.read())
    if not ws:
        return 0.0
    return sum(len(w) for w in ws) / len(ws)


def report(path):
    for word, count in top_words(path):
        print(f"{word:20} {count}")
    print(f"mean word length: {mean_length(path):.2f}")
