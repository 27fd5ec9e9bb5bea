def average(values, default=0.0):
    total = 0
    count = 0
    for value in values:
        total += value
        count += 1
    if count == 0:
        return default
    return total / count
