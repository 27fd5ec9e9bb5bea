"""Call a function again when it fails, waiting longer each time."""
import time


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


def fetch_with_retry(url, opener):
    return retry(lambda: opener(url).read())
