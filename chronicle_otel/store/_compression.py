"""Compression of the local store: span lines and payloads as zstd frames, lines with a trained dictionary.

A span line is one OTLP/JSON document; most of its bytes repeat from line to line (attribute keys, resource, ids,
the JSON escaping of payloads). Compressed one by one, small lines gain little; compressed with a dictionary trained
on the store's own first lines, each line still reads on its own (no block to unpack around it) and the store holds
about a third of the raw payload bytes.

- The writer compresses each line as one zstd frame. Until a dictionary exists it uses none, and keeps a sample of
  the lines it wrote; once the sample is large enough it trains a dictionary (once per store, about 0.15 s), saves it
  as ``dicts/<id>.zdict`` and uses it from then on, at level 2 (as fast as level 1 on span lines, within a few
  percent of level 3's size; level 3 before). With the dictionary, the lines of a chunk are compressed in one call
  (one release of the interpreter lock instead of one per line); each is still its own frame. A payload (the whole
  value cut on a span) is one frame, without a dictionary.
- A store removed and started again while the writer runs gets the dictionary's file again before the first line
  that needs it (:meth:`LineCompressor.save_dictionary`): the writer keeps its dictionary, and lines already
  compressed with it are written to the new store.
- A frame names the dictionary it needs by id; the reader loads ``dicts/<id>.zdict`` then. Lines and payloads
  written before compression (JSON, which never starts with the zstd magic number) read as they are.
- The store is untrusted input: a frame must declare its size, within the line or payload limit, before anything
  is inflated; a dictionary file must be a small regular file of the store, named by its id.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path
from typing import Any, Final

from ..errors import StoreError

__all__ = ["DICTS", "MAGIC", "LineCompressor", "inflate"]

MAGIC: Final = b"\x28\xb5\x2f\xfd"
"""The first bytes of a zstd frame (JSON never starts with them)."""

DICTS: Final = "dicts"
"""The store's directory of compression dictionaries."""

LEVEL: Final = 3
"""The zstd level of payloads and of lines written before the dictionary exists."""
LINE_LEVEL: Final = 2
"""The zstd level of lines with the dictionary: as fast as level 1 on span lines, within 6% of level 3's size."""
DICT_SIZE: Final = 64 * 1024
MAX_DICT_BYTES: Final = 1 << 20
SAMPLE_LINES: Final = 1000
SAMPLE_BYTES: Final = 8 << 20
_MULTI_MIN: Final = 4  # lines from which one call compresses them all

_zstd: Any
try:  # pragma: no cover - the import is tested by the suite's environment
    import zstandard as _zstd
except ImportError:  # pragma: no cover
    _zstd = None


def available() -> bool:
    """Whether zstd is installed (``zstandard``): without it the store writes plain lines."""
    return _zstd is not None


class LineCompressor:
    """The writer's compression of lines and payloads for one store directory (thread-compatible: one writer)."""

    def __init__(self, root: Path, *, enabled: bool = True) -> None:
        self.root = root
        self._plain = _zstd.ZstdCompressor(level=LEVEL) if _zstd is not None and enabled else None
        self._with_dict: Any = None
        self._dict: Any = None  # the dictionary of _with_dict
        self._samples: list[bytes] = []
        self._sampled = 0
        self._failures = 0
        self._multi = True
        if self._plain is not None:
            self._load_newest()

    def line(self, data: bytes) -> bytes:
        """``data`` (one span line) as it is stored."""
        if self._with_dict is not None:
            return bytes(self._with_dict.compress(data))
        if self._plain is None:
            return data
        self._sample(data)
        return bytes(self._plain.compress(data))

    def lines(self, lines: list[bytes]) -> list[bytes]:
        """``lines`` as they are stored, in order; a line that is a zstd frame already is kept as it is."""
        if self._with_dict is not None:  # frames already made are kept there too
            return self._with_dictionary(lines)
        return [line if line.startswith(MAGIC) else self.line(line) for line in lines]

    def encode(self, lines: list[bytes]) -> list[bytes]:
        """``lines`` compressed with the dictionary, or themselves while there is none yet (:meth:`lines` then
        compresses them, and samples them for the dictionary)."""
        if self._with_dict is None:
            return lines
        return self._with_dictionary(lines)

    def _with_dictionary(self, lines: list[bytes]) -> list[bytes]:
        """Each of ``lines`` compressed with the dictionary; in one call when the backend can (the interpreter lock
        is then released once, not once per line)."""
        if self._multi and len(lines) >= _MULTI_MIN and not any(line.startswith(MAGIC) for line in lines):
            try:
                frames = self._with_dict.multi_compress_to_buffer(lines, threads=0)
            except (AttributeError, NotImplementedError):  # the cffi backend has no batch API
                self._multi = False
            else:
                return [frames[i].tobytes() for i in range(len(frames))]
        compress = self._with_dict.compress
        return [line if line.startswith(MAGIC) else compress(line) for line in lines]

    def payload(self, data: bytes) -> bytes:
        """``data`` (a whole payload) as it is stored."""
        return bytes(self._plain.compress(data)) if self._plain is not None else data

    # -------------------------------------------------------------------------------- the dictionary

    def _sample(self, data: bytes) -> None:
        if self._failures >= 3:
            return
        self._samples.append(data)
        self._sampled += len(data)
        if len(self._samples) >= SAMPLE_LINES or self._sampled >= SAMPLE_BYTES:
            self._train()

    def _train(self) -> None:
        assert _zstd is not None
        samples, self._samples, self._sampled = self._samples, [], 0
        try:
            trained = _zstd.train_dictionary(DICT_SIZE, samples, level=LINE_LEVEL)
        except _zstd.ZstdError:  # too few or too alike samples: try again with the next ones
            self._failures += 1
            return
        self._save(trained)
        self._use(trained)

    @property
    def dict_id(self) -> int:
        """The id of the dictionary lines are compressed with; 0 while there is none."""
        return int(self._dict.dict_id()) if self._dict is not None else 0

    def save_dictionary(self) -> bool:
        """Write the dictionary's file into the store again when it is not there (the store, or its ``dicts/``, was
        removed while this writer ran): a frame made with it must never be written to a store without it.

        Returns:
            True when the file was written now.

        Raises:
            OSError: the file cannot be written (the batch that needs it is not written either).
        """
        if self._dict is None:
            return False
        dict_id = self._dict.dict_id()
        if (self.root / DICTS / f"{dict_id}.zdict").exists():
            return False
        self._save(self._dict)
        return True

    def _save(self, dictionary: Any) -> None:
        """Write ``dictionary`` as ``dicts/<id>.zdict`` whole (a temporary name, then a rename)."""
        folder = self.root / DICTS
        folder.mkdir(exist_ok=True)
        dict_id = dictionary.dict_id()
        tmp = folder / f".{dict_id}.{os.getpid()}.tmp"
        tmp.write_bytes(dictionary.as_bytes())
        os.replace(tmp, folder / f"{dict_id}.zdict")

    def _load_newest(self) -> None:
        """Use the dictionary another writer of this store trained last, if any."""
        assert _zstd is not None
        folder = self.root / DICTS
        try:
            entries = [p for p in folder.iterdir() if p.suffix == ".zdict" and p.stem.isdigit()]
        except OSError:
            return
        entries.sort(key=lambda p: _mtime(p))
        for path in reversed(entries):
            try:
                dictionary = _dictionary(path, int(path.stem))
                self._use(dictionary)
            except (StoreError, _zstd.ZstdError):  # damaged or misnamed: lines written with it could not be read
                continue
            return

    def _use(self, dictionary: Any) -> None:
        assert _zstd is not None
        dictionary.precompute_compress(level=LINE_LEVEL)
        self._with_dict = _zstd.ZstdCompressor(dict_data=dictionary, level=LINE_LEVEL)
        self._dict = dictionary


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _read_dict(path: Path) -> bytes:
    """A dictionary file's bytes: a regular file (no symbolic link) of at most :data:`MAX_DICT_BYTES`."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise StoreError(f"compression dictionary missing ({exc.strerror})", path) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_DICT_BYTES:
            raise StoreError(f"compression dictionary is not a regular file of at most {MAX_DICT_BYTES} bytes", path)
        data = os.read(fd, MAX_DICT_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_DICT_BYTES:
        raise StoreError(f"compression dictionary larger than {MAX_DICT_BYTES} bytes", path)
    return data


def _dictionary(path: Path, dict_id: int) -> Any:
    """The zstd dictionary of a dictionary file, which must hold dictionary ``dict_id`` (its name).

    Raises:
        StoreError: the file is missing, not a regular file, too large, or not that dictionary.
    """
    assert _zstd is not None
    data = _read_dict(path)
    try:
        dictionary = _zstd.ZstdCompressionDict(data, dict_type=_zstd.DICT_TYPE_FULLDICT)
        found = dictionary.dict_id()
    except _zstd.ZstdError as exc:
        raise StoreError(f"damaged compression dictionary ({exc})", path) from None
    if found != dict_id:
        raise StoreError(f"compression dictionary {dict_id} holds dictionary {found}", path)
    return dictionary


_UNKNOWN_SIZE: Final = (1 << 64) - 2  # ZSTD_CONTENTSIZE_ERROR and ZSTD_CONTENTSIZE_UNKNOWN

_decompressors: dict[tuple[str, int], Any] = {}
_lock = threading.Lock()


def _decompressor(root: Path, dict_id: int) -> Any:
    assert _zstd is not None
    key = (str(root), dict_id)
    with _lock:
        found = _decompressors.get(key)
    if found is not None:
        return found
    if dict_id:
        path = root / DICTS / f"{dict_id}.zdict"
        dictionary = _dictionary(path, dict_id)
        try:
            made = _zstd.ZstdDecompressor(dict_data=dictionary)
        except _zstd.ZstdError as exc:
            raise StoreError(f"damaged compression dictionary ({exc})", path) from None
    else:
        made = _zstd.ZstdDecompressor()
    with _lock:
        if len(_decompressors) > 64:
            _decompressors.clear()
        _decompressors[key] = made
    return made


def inflate(data: bytes, root: Path, where: Path, offset: int, limit: int) -> bytes:
    """``data`` as it was written: itself when it is not a zstd frame, else the frame inflated.

    Raises:
        StoreError: the frame does not declare its size, declares more than ``limit`` bytes, needs a dictionary the
            store does not have, or is damaged; ``where`` and ``offset`` name it.
    """
    if not data.startswith(MAGIC):
        return data
    if _zstd is None:
        raise StoreError(f"the data at byte {offset} is zstd-compressed: install zstandard to read it", where)
    try:
        params = _zstd.get_frame_parameters(data)
    except _zstd.ZstdError as exc:
        raise StoreError(f"damaged zstd frame at byte {offset} ({exc})", where) from None
    size = params.content_size
    if size < 0 or size >= _UNKNOWN_SIZE or size > limit:
        declared = "no size" if size < 0 or size >= _UNKNOWN_SIZE else f"{size} bytes"
        raise StoreError(f"the zstd frame at byte {offset} declares {declared}; at most {limit} bytes are read", where)
    decompressor = _decompressor(root, params.dict_id)
    try:
        out = decompressor.decompress(data, max_output_size=size)
    except _zstd.ZstdError as exc:
        raise StoreError(f"damaged zstd frame at byte {offset} ({exc})", where) from None
    if len(out) != size:
        raise StoreError(f"the zstd frame at byte {offset} inflates to {len(out)} bytes, not {size}", where)
    return bytes(out)
