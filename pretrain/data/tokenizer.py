"""SentencePiece tokenizers: ``pretrain tokenizer train`` and :func:`load_tokenizer`.

Training samples documents uniformly at random (seeded) from the kept shards of a curation output
folder until a byte cap is reached, feeds them line by line to SentencePiece (BPE with byte fallback by
default, or unigram), and writes ``PATH.model`` plus ``PATH.json`` beside it with the special ids:

    {"eod_id": 2, "bos_id": 1, "pad_id": 3, "unk_id": 0, "vocab_size": ..., ...}

The text is kept as is (identity normalization, no whitespace folding, "\\n" is a piece), so
``decode(encode(text)) == text``. A pretrained SentencePiece ``.model`` loads too: without a ``.json``
beside it, EOD is the model's ``</s>`` (eos) and a missing pad is -1 (Megatron's "no pad" id).
"""
from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path

import numpy as np

from curate import json_files
from pretrain.data.defaults import DEFAULT_MAX_BYTES

MAX_MODEL_BYTES = 1 << 30  # larger than any SentencePiece model (a 256k vocabulary is about 5 MB)
MAX_LINE_BYTES = 4096  # SentencePiece skips training sentences longer than max_sentence_length (4192)
SPECIALS = {"unk_id": 0, "bos_id": 1, "eod_id": 2, "pad_id": 3}


class Tokenizer:
    """A SentencePiece model with the ids a trainer needs. Pickles by path (workers reload it)."""

    def __init__(self, model_path: str | os.PathLike, specials: dict | None = None):
        import sentencepiece as spm

        self.model_path = str(model_path)
        if not os.path.isfile(self.model_path):
            if os.path.exists(self.model_path):  # a folder, a device, a FIFO: never handed to SentencePiece
                raise ValueError(f"tokenizer model {self.model_path}: not a regular file; give a SentencePiece "
                                 ".model (`pretrain tokenizer train` writes one)")
            raise FileNotFoundError(f"tokenizer model {self.model_path} not found")
        size = os.path.getsize(self.model_path)
        if size > MAX_MODEL_BYTES:  # SentencePiece reads the whole file into memory before it checks anything
            raise ValueError(f"tokenizer model {self.model_path}: {size:,} bytes, more than any SentencePiece model "
                             f"({MAX_MODEL_BYTES >> 20} MiB); give a SentencePiece .model")
        self._sp = spm.SentencePieceProcessor()
        try:
            self._sp.Load(self.model_path)
        except (OSError, RuntimeError) as e:
            raise ValueError(f"{self.model_path} is not a SentencePiece model: {e}") from None
        self.vocab_size = int(self._sp.GetPieceSize())
        _check_pieces(self._sp, self.model_path)
        if specials is None:
            specials = _specials_from_model(self._sp, self.model_path)
        self.eod_id = int(specials["eod_id"])
        self.bos_id = int(specials["bos_id"])
        self.pad_id = int(specials["pad_id"])
        self.unk_id = int(specials["unk_id"])
        for name in ("eod_id", "bos_id", "pad_id", "unk_id"):
            value = getattr(self, name)
            low = 0 if name == "eod_id" else -1  # -1: no such piece (a pretrained model's pad); EOD is written
            if value >= self.vocab_size or value < low:
                raise ValueError(f"{self.model_path}: {name} {value} is outside the vocabulary of {self.vocab_size} "
                                 f"(0 to {self.vocab_size - 1})")

    def encode(self, text: str) -> list[int]:
        return self._sp.EncodeAsIds(text)

    def encode_batch(self, texts: list[str], num_threads: int = -1) -> list[list[int]]:
        """Encode many texts in SentencePiece's own threads (-1: all cores)."""
        return self._sp.Encode(list(texts), out_type=int, num_threads=num_threads)

    def decode(self, ids) -> str:
        if isinstance(ids, np.ndarray):
            ids = ids.tolist()
        return self._sp.DecodeIds(list(ids))

    def id_to_piece(self, i: int) -> str:
        return self._sp.IdToPiece(int(i))

    @property
    def eod(self) -> int:  # Megatron's tokenizer attribute names
        return self.eod_id

    @property
    def pad(self) -> int:
        return self.pad_id

    def sha256(self) -> str:
        with open(self.model_path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()

    def __reduce__(self):
        return (Tokenizer, (self.model_path, self.specials()))

    def specials(self) -> dict:
        return {"eod_id": self.eod_id, "bos_id": self.bos_id, "pad_id": self.pad_id, "unk_id": self.unk_id}

    def __repr__(self) -> str:
        return (f"Tokenizer({self.model_path!r}, vocab_size={self.vocab_size}, eod={self.eod_id}, "
                f"bos={self.bos_id}, pad={self.pad_id}, unk={self.unk_id})")


def _check_pieces(sp, where: str) -> None:
    """Every piece is text (UTF-8): a model whose protobuf holds other bytes in a piece loads, and then
    ``decode`` raises ``UnicodeDecodeError`` in whatever command first writes a token out (generate, eval)."""
    n = int(sp.GetPieceSize())
    if n == 0:
        raise ValueError(f"{where}: the SentencePiece model has no pieces")
    try:
        sp.IdToPiece(list(range(n)))
    except UnicodeDecodeError:
        for i in range(n):
            try:
                sp.IdToPiece(i)
            except UnicodeDecodeError as e:
                raise ValueError(f"{where}: piece {i} of the SentencePiece model is not UTF-8 text ({e.reason}); "
                                 "the file is damaged or not a SentencePiece model") from None


def specials_path(model_path: str | os.PathLike) -> Path:
    return Path(model_path).with_suffix(".json")


SIDECAR_KEYS = (*SPECIALS, "vocab_size", "model_type", "model_sha256")  # what every sidecar train_tokenizer wrote holds


def is_quarry_sidecar(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a special-ids file as :func:`train_tokenizer` writes it: a JSON object with the special
    ids, ``vocab_size``, ``model_type`` and ``model_sha256``. A sidecar a user wrote for a pretrained model (the ids
    alone), or any other JSON file, is not."""
    from curate.shards import read_record

    meta = read_record(path)  # None: missing, not a regular file, not JSON, not an object
    return meta is not None and all(k in meta for k in SIDECAR_KEYS)


def is_quarry_model(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a SentencePiece model :func:`train_tokenizer` wrote: its sidecar records its sha256, or
    (the sidecar lost, as by a run killed between the two writes) the model's own settings are the ones Quarry
    trains with (identity normalization; unk, bos, eos, pad = 0, 1, 2, 3; ``"\\n"`` a user-defined piece). A
    pretrained model, or any other file, is not."""
    p = Path(path)
    try:
        if not p.is_file() or p.stat().st_size > MAX_MODEL_BYTES:
            return False
        data = p.read_bytes()
    except OSError:
        return False
    side = specials_path(p)
    if side != p and is_quarry_sidecar(side):
        from curate.shards import read_record

        if (read_record(side) or {}).get("model_sha256") == hashlib.sha256(data).hexdigest():
            return True
    try:
        from sentencepiece import sentencepiece_model_pb2

        proto = sentencepiece_model_pb2.ModelProto.FromString(data)
    except Exception:  # noqa: BLE001 - not a protobuf (DecodeError), or no protobuf module: not recognisably ours
        return False
    ts = proto.trainer_spec
    return (len(proto.pieces) > 0 and proto.normalizer_spec.name == "identity" and "\n" in ts.user_defined_symbols
            and (ts.unk_id, ts.bos_id, ts.eos_id, ts.pad_id) == tuple(SPECIALS[k] for k in
                                                                      ("unk_id", "bos_id", "eod_id", "pad_id")))


def output_problem(output: str | os.PathLike, force: bool = False) -> str | None:
    """A message when training to ``output`` cannot or must not go ahead, else None; checked before any shard is
    read. Not a ``.model`` path; ``output`` or its sidecar ``.json`` a folder, or below a file; and, unless
    ``force``, ``output`` an existing file that is not a SentencePiece model Quarry trained
    (:func:`is_quarry_model`) or the sidecar an existing file that is not one Quarry wrote
    (:func:`is_quarry_sidecar`). A rerun onto its own earlier output goes ahead."""
    from curate.write_guard import output_file_problem

    out = Path(output)
    if out.suffix != ".model":
        return f"the output must be a .model path, got {out}"
    side = specials_path(out)
    for path in (out, side):
        problem = output_file_problem(path)
        if problem:
            return problem
    if force:
        return None
    if os.path.lexists(out) and not is_quarry_model(out):
        return (f"{out} exists and is not a tokenizer `pretrain tokenizer train` wrote: choose another --output, "
                f"or pass --force to overwrite it (and {side.name} beside it)")
    if os.path.lexists(side) and not is_quarry_sidecar(side):
        return (f"{side} exists and is not the special-ids file `pretrain tokenizer train` writes beside "
                f"{out.name}: choose another --output, or pass --force to overwrite it")
    return None


def load_tokenizer(path: str | os.PathLike) -> Tokenizer:
    """A SentencePiece ``.model`` (ours or pretrained); special ids from ``PATH.json`` when present."""
    path = Path(path)
    side = specials_path(path)
    specials = None
    if side.is_file() and side != path:
        meta = json_files.read_json(side)
        if isinstance(meta, dict) and all(k in meta for k in SPECIALS):
            bad = [k for k in SPECIALS if isinstance(meta[k], bool) or not isinstance(meta[k], int)]
            if bad:
                raise ValueError(f"{side}: {bad[0]} = {meta[bad[0]]!r} is not a token id (an integer); "
                                 f"delete {side.name} to read the ids from the model, or fix it")
            specials = {k: meta[k] for k in SPECIALS}
            _check_sidecar_ids(side, path, meta)
    return Tokenizer(path, specials)


def _check_sidecar_ids(side: Path, model_path: Path, meta: dict) -> None:
    """The sidecar written for this model (its ``model_sha256``, when it records one, is the model's: a sidecar
    left beside a retrained or replaced model would give every document another EOD), and its ids inside the model's vocabulary: EOD (written after every document) 0 to vocab size - 1,
    the other special ids too, or -1 (no such piece). Checked here, naming the sidecar, and not as an
    ``OverflowError`` deep in ``pretrain tokenize`` after the work has started."""
    import sentencepiece as spm

    if not os.path.isfile(model_path) or os.path.getsize(model_path) > MAX_MODEL_BYTES:
        return  # the Tokenizer says what is wrong with the model
    want = meta.get("model_sha256")
    if want is not None:  # a sidecar `tokenizer train` wrote names its model: ids of another model are wrong here
        got = hashlib.sha256(Path(model_path).read_bytes()).hexdigest()
        if want != got:
            raise ValueError(f"{side} was written for another model (model_sha256 {str(want)[:16]}...), not "
                             f"{model_path.name} (sha256 {got[:16]}...): a stale or foreign special-ids file; "
                             f"restore the model it was written with, or delete {side.name} to read the ids from "
                             "the model")
    sp = spm.SentencePieceProcessor()
    try:
        sp.Load(str(model_path))
    except (OSError, RuntimeError):
        return  # not a model: the Tokenizer says so
    vocab = int(sp.GetPieceSize())
    for name in SPECIALS:
        value = meta[name]
        low = 0 if name == "eod_id" else -1
        if not low <= value < vocab:
            allowed = f"0 to {vocab - 1}" + ("" if name == "eod_id" else ", or -1 for none")
            raise ValueError(f"{side}: {name} = {value} is not a token id of {model_path.name} (vocabulary of "
                             f"{vocab}: {allowed}); delete {side.name} to read the ids from the model, or fix it")


def _specials_from_model(sp, where: str) -> dict:
    eod = sp.eos_id()
    if eod < 0:
        for piece in ("<|endoftext|>", "</s>", "<eos>", "<eod>"):
            pid = sp.PieceToId(piece)
            if pid != sp.unk_id() and sp.IdToPiece(pid) == piece:
                eod = pid
                break
    if eod < 0:
        raise ValueError(f"{where}: the model has no end-of-document piece (eos, </s> or <|endoftext|>); "
                         "write its special ids into a .json beside it")
    return {"eod_id": eod, "bos_id": sp.bos_id(), "pad_id": sp.pad_id(), "unk_id": sp.unk_id()}


# -------------------------------------------------------------------------------------------- training

def sample_training_text(input_dir: str | os.PathLike | list, max_bytes: int, seed: int = 0,
                         text_column: str = "text") -> tuple[list[str], dict]:
    """Lines of a uniform random sample of documents, at most ``max_bytes`` of UTF-8 in all."""
    import pyarrow.compute as pc

    from curate.shards import read_shard

    from pretrain.data.manifest_check import verify_shard

    entries = _entries(input_dir)
    shards = [e.path for e in entries]
    sizes = []
    for entry, path in zip(entries, shards):
        verify_shard(entry)  # the shard the manifest names: its sha256 and rows
        col = _text_column(read_shard(path, columns=[text_column]), text_column, path)
        lengths = pc.binary_length(col) if len(col) else None
        sizes.append(np.zeros(0, np.int64) if lengths is None else
                     np.asarray(lengths.to_numpy(zero_copy_only=False), dtype=np.float64))
    doc_bytes = np.nan_to_num(np.concatenate(sizes) if sizes else np.zeros(0)).astype(np.int64)
    shard_of = np.repeat(np.arange(len(shards)), [len(s) for s in sizes])
    row_of = np.concatenate([np.arange(len(s)) for s in sizes]) if sizes else np.zeros(0, np.int64)
    order = np.random.default_rng(seed).permutation(len(doc_bytes))
    take = order[np.cumsum(doc_bytes[order]) <= max_bytes] if max_bytes > 0 else order
    if len(take) == 0 and len(order):  # even the first document passes the cap: take part of it
        take = order[:1]
    lines: list[str] = []
    used = sampled = 0  # sampled: the documents that gave text to train on (not a null, empty or blank one)
    for s in np.unique(shard_of[take]):
        rows = np.sort(row_of[take][shard_of[take] == s])
        col = _text_column(read_shard(shards[s], columns=[text_column]), text_column, shards[s])
        for text in col.take(rows).to_pylist():
            if not isinstance(text, str):
                continue
            gave = False
            for piece in (p for line in text.split("\n") for p in _chunks(line)):
                size = len(piece.encode())
                if max_bytes > 0 and used + size > max_bytes:
                    break
                lines.append(piece)
                used += size
                gave = True
            sampled += gave
    info = {"shards": len(shards), "documents": int(len(doc_bytes)), "sampled_documents": sampled,
            "sampled_bytes": used, "total_bytes": int(doc_bytes.sum())}
    return lines, info


def _chunks(line: str):
    """A line cut at spaces into pieces SentencePiece will not skip as too long: while what is left of it is
    over ``MAX_LINE_BYTES`` in UTF-8, a piece of at most a quarter as many characters (to its last space). The
    bytes left are counted down piece by piece, so a line of any length costs time linear in it (measuring
    the rest anew at every cut made a 10 MB line without newlines take seconds)."""
    if not line.strip():
        return
    step = MAX_LINE_BYTES // 4
    left = len(line.encode())
    start = 0
    while left > MAX_LINE_BYTES:
        cut = line.rfind(" ", start, start + step)
        if cut <= start:
            cut = start + step
        piece = line[start:cut]
        yield piece
        left -= len(piece.encode())
        start = cut
    rest = line[start:]
    if rest.strip():
        yield rest


def train_tokenizer(input_dir: str | os.PathLike | list, vocab_size: int, output: str | os.PathLike, *,
                    model_type: str = "bpe", max_bytes: int = DEFAULT_MAX_BYTES, byte_fallback: bool = True,
                    character_coverage: float = 0.9995, seed: int = 0, threads: int | None = None,
                    text_column: str = "text", sample_bytes: int | None = None, executor=None,
                    force: bool = False) -> Tokenizer:
    """Train a SentencePiece model on sampled text of a curation output; write ``output`` (``.model``)
    and its special ids to ``output`` with ``.json``. ``sample_bytes``: read a bounded sample spread over every
    shard instead (:mod:`pretrain.data.tokenizer_sample`), its shard tasks on ``executor`` when given. An existing
    ``output`` or sidecar that Quarry did not write is refused before anything is read, unless ``force``
    (:func:`output_problem`)."""
    import sentencepiece as spm

    if model_type not in ("bpe", "unigram"):
        raise ValueError(f"model type must be 'bpe' or 'unigram', got {model_type!r}")
    output = Path(output)
    problem = output_problem(output, force)
    if problem:
        raise ValueError(problem)
    if sample_bytes is not None:
        from pretrain.data.tokenizer_sample import sample_spread_text

        lines, info = sample_spread_text(_entries(input_dir), sample_bytes, seed, text_column, executor)
    else:
        lines, info = sample_training_text(input_dir, max_bytes, seed, text_column)
    if not lines:
        raise ValueError(f"{input_dir}: no text to train on")
    min_vocab = len(SPECIALS) + 1 + (256 if byte_fallback else 0)
    if vocab_size <= min_vocab:
        raise ValueError(f"vocab size {vocab_size} is too small: it must exceed {min_vocab} "
                         f"({len(SPECIALS)} special ids, the newline piece" + (", 256 bytes)" if byte_fallback else ")"))
    model = io.BytesIO()
    if hasattr(spm, "set_random_generator_seed"):
        spm.set_random_generator_seed(seed)
    try:
        spm.SentencePieceTrainer.Train(
            sentence_iterator=iter(lines), model_writer=model, vocab_size=vocab_size, model_type=model_type,
            byte_fallback=byte_fallback, character_coverage=character_coverage,
            normalization_rule_name="identity", remove_extra_whitespaces=False,
            allow_whitespace_only_pieces=True, split_digits=True, user_defined_symbols=["\n"],
            unk_id=SPECIALS["unk_id"], bos_id=SPECIALS["bos_id"], eos_id=SPECIALS["eod_id"],
            pad_id=SPECIALS["pad_id"], input_sentence_size=0, shuffle_input_sentence=False,
            num_threads=threads or os.cpu_count() or 1, minloglevel=2,
        )
    except RuntimeError as e:
        raise ValueError(f"SentencePiece could not train: {e}") from None
    from curate.shards import write_json
    from pretrain.data.indexed import atomic_file

    with atomic_file(output) as f:
        f.write(model.getvalue())
    meta = dict(SPECIALS, vocab_size=vocab_size, model_type=model_type, byte_fallback=byte_fallback,
                character_coverage=character_coverage, seed=seed,
                input=str(input_dir) if isinstance(input_dir, (str, os.PathLike)) else [str(d) for d in input_dir],
                model_sha256=hashlib.sha256(model.getvalue()).hexdigest(), **info)
    write_json(meta, specials_path(output))
    return load_tokenizer(output)


def _entries(input_dir) -> list:
    """The shards of one or more curation outputs, checked (:func:`~pretrain.data.manifest_check.manifest_entries`);
    a shard named by two of the folders' manifests (any spelling, a hard link, a byte-identical copy) counts as
    listed twice."""
    from pretrain.data.manifest_check import SeenShards, manifest_entries

    dirs = [input_dir] if isinstance(input_dir, (str, os.PathLike)) else list(input_dir)
    entries, seen = [], SeenShards()
    for d in dirs:
        for e in manifest_entries(d):
            also = seen.add(e.path, e.sha256, e.rows, f"{e.name} of {d}")
            if also:
                raise ValueError(f"shard {e.name} of {d} is also listed as {also}: its documents would be "
                                 "sampled twice; give each curation folder once")
            entries.append(e)
    return entries


def _text_column(table, text_column: str, path):
    if text_column not in table.column_names:
        raise ValueError(f"{path} has no {text_column!r} column (columns: {table.column_names})")
    return text_array(table.column(text_column), path, text_column)


def text_array(column, path, text_column: str = "text"):
    """``column`` (an Arrow array or chunked array, the text column of the shard at ``path``) as UTF-8 text, read
    as the curation readers read a table's text (``curate.readers.arrow_text.string_array``): string, large_string
    and string_view; binary, large_binary and binary_view decoded as UTF-8; dictionary- and run-end-encoded values
    decoded first. A row that is not valid UTF-8 is null (counted as an encode error, as any non-text document).
    Any other type (numbers, lists, ...) is a ``ValueError`` naming the shard and type."""
    from curate.readers.arrow_text import NotText, string_array

    try:
        return string_array(column)[0]
    except NotText as e:
        raise ValueError(f"shard {path}: column {text_column!r} has type {e.type}, not text; give a column of "
                         "strings (string, large_string, string_view) or UTF-8 bytes (binary), or another "
                         "--text-column") from None
