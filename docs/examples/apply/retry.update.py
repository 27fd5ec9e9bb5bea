def retry(fn, attempts=3, delay=0.5, log=None):
    # ... existing code ...
            last = e
            if log is not None:
                log(f"attempt {i + 1} failed: {e}")
            time.sleep(delay * (2 ** i))
# ... existing code ...
