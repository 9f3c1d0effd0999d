"""Reading test-suite files, shared by the contrastive scoring and translation suites."""
import gzip


class SuiteFormatError(ValueError):
    """A malformed test-suite file; the message names the file and the line."""


def open_text(path):
    """A suite file as UTF-8 text, gzipped or not."""
    return gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(path, encoding="utf-8")
