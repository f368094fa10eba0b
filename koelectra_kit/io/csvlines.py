"""CSV written with "\n" line ends that every reader reads back record for record. Python's csv module (and
pandas' ``to_csv``, built on it) quotes a field for the delimiter, the quote character and the characters of *its*
line terminator only: with "\n" a field holding a lone "\r" (an old Mac line break, a cut CRLF) went out bare, and
every CSV reader (pandas, Excel, this package's) ends a record at a bare "\r": a labelled row came back as two, its
cells shifted under the wrong columns. Written with "\r\n" the writer quotes it; the record ends (outside quotes)
then become "\n" again, so files without a "\r" in them are the same bytes as before."""
from __future__ import annotations

import csv
import io


def _record_ends_to_lf(text: str) -> str:
    # outside quotes (the even pieces between '"'s: a doubled "" inside a field leaves an empty piece) every "\r\n" is
    # a record end the writer added; inside, a cell's own line breaks, kept as they are
    parts = text.split('"')
    parts[::2] = [p.replace("\r\n", "\n") for p in parts[::2]]
    return '"'.join(parts)


def csv_line(values) -> str:
    """One CSV record ending in "\n", a field with a "\r" in it quoted."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n").writerow(values)
    return buf.getvalue()[:-2] + "\n"


class RowWriter:
    """``csv.writer(f, lineterminator="\n")`` that quotes a field holding a "\r" (``csv_line`` for such rows; the
    rest go through the plain writer)."""

    def __init__(self, f):
        self.f, self.plain = f, csv.writer(f, lineterminator="\n")

    def writerow(self, row) -> None:
        if any(isinstance(v, str) and "\r" in v for v in row):
            self.f.write(csv_line(row))
        else:
            self.plain.writerow(row)


def frame_csv(df, header: bool = True, **kwargs) -> str:
    """``df.to_csv`` (no index, "\n" line ends) as a string, a field with a "\r" in it quoted."""
    text = df.to_csv(None, index=False, header=header, lineterminator="\n", **kwargs)
    if "\r" not in text:  # the usual case: one pass
        return text
    return _record_ends_to_lf(df.to_csv(None, index=False, header=header, lineterminator="\r\n", **kwargs))
