def retry(fn, attempts=3, delay=0.5, log=None):
    last = None
    for i in range(attempts):
        try:
            return fn()
        except OSError as e:
            last = e
            if log is not None:
                log(f"attempt {i + 1} failed: {e}")
            time.sleep(delay * (2 ** i))
    raise last
# ... existing code ...
