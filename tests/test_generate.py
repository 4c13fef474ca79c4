"""`pretrain generate`: greedy decoding is deterministic and equals argmax decoding done by hand; sampling is
seeded and stays within the top k; generation stops at EOD; the window slides past max_seq_len."""
from __future__ import annotations

import pytest
import torch

from pretrain.config import Config, finalize
from pretrain.generate import generate_ids, next_token
from pretrain.model import GPT

VOCAB = 300

# single-process checkpoint load/save: DCP warns that no process group exists
pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")


def tiny_model(seed=0, seq_len=16, **model_kw):
    cfg = Config()
    cfg.data.kind, cfg.data.seq_len = "synthetic", seq_len
    for k, v in dict(vocab_size=VOCAB, hidden_size=32, num_layers=2, num_heads=2, init_seed=seed, **model_kw).items():
        setattr(cfg.model, k, v)
    finalize(cfg, 1)
    model = GPT(cfg.model).eval()
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # a random model with sharp enough logits that argmax is not a near tie
        for p in model.parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=gen))
    return model


def argmax_by_hand(model, prompt, n, window, vocab=VOCAB):
    ids = list(prompt)
    for _ in range(n):
        with torch.no_grad():
            logits = model(torch.tensor([ids[-window:]]))[0, -1]
        ids.append(int(logits[:vocab].argmax()))
    return ids[len(prompt):]


@pytest.mark.parametrize("kind", [dict(position="learned", norm="layernorm", mlp="gelu"),
                                  dict(position="rope", norm="rmsnorm", mlp="swiglu")])
def test_greedy_equals_argmax_by_hand(kind):
    model = tiny_model(**kind)
    prompt = [5, 17, 42, 7]
    by_hand = argmax_by_hand(model, prompt, 30, window=16)  # 34 tokens: the window slides past max_seq_len 16
    greedy = generate_ids(model, prompt, 30, temperature=0.0)
    assert greedy == by_hand
    assert generate_ids(model, prompt, 30, temperature=0.0) == greedy  # deterministic
    assert generate_ids(model, prompt, 30, temperature=0.7, top_k=1, seed=3) == greedy  # top-k 1 is greedy too
    assert len(set(greedy)) > 1
    # temperatures so small that logits / T overflow: the same as greedy, never an error inside torch.multinomial
    for tiny in (1e-45, 1e-300, 5e-324):
        assert generate_ids(model, prompt, 30, temperature=tiny, seed=3) == greedy
        assert generate_ids(model, prompt, 30, temperature=tiny, top_k=5, seed=4) == greedy


def test_padding_columns_are_never_chosen():
    model = tiny_model()
    assert model.config.padded_vocab_size > VOCAB
    with torch.no_grad():  # give the padding columns of the (tied) head the largest logits
        model.embed.weight[VOCAB:] = 100 * model.norm.bias
        assert int(model(torch.tensor([[1, 2, 3]]))[0, -1].argmax()) >= VOCAB
    out = generate_ids(model, [1, 2, 3], 10, temperature=0.0) + generate_ids(model, [1, 2, 3], 10, seed=1)
    assert max(out) < VOCAB


def test_stops_at_eod():
    model = tiny_model()
    prompt = [5, 17, 42, 7]
    greedy = generate_ids(model, prompt, 12, temperature=0.0)
    eod = greedy[3]
    first = greedy.index(eod)
    assert generate_ids(model, prompt, 12, temperature=0.0, eod_id=eod) == greedy[:first]
    # an empty prompt starts from EOD (a document boundary)
    after_eod = argmax_by_hand(model, [eod], 8, 16)
    expected = after_eod[:after_eod.index(eod)] if eod in after_eod else after_eod
    assert generate_ids(model, [], 8, temperature=0.0, eod_id=eod) == expected


def test_sampling_is_seeded_and_within_top_k():
    model = tiny_model()
    prompt = [5, 17, 42, 7]
    a = generate_ids(model, prompt, 20, temperature=1.0, top_k=5, seed=11)
    assert a == generate_ids(model, prompt, 20, temperature=1.0, top_k=5, seed=11)
    others = {tuple(generate_ids(model, prompt, 20, temperature=1.0, top_k=5, seed=s)) for s in range(12, 16)}
    assert len(others | {tuple(a)}) > 1  # a different seed gives a different sample
    ids = list(prompt)
    for tok in a:  # every sampled token is among the 5 most likely at its step
        with torch.no_grad():
            logits = model(torch.tensor([ids[-16:]]))[0, -1, :VOCAB]
        assert tok in torch.topk(logits, 5).indices.tolist()
        ids.append(tok)


def test_next_token_distribution():
    logits = torch.tensor([0.0, 1.0, 2.0, 3.0])
    gen = torch.Generator().manual_seed(0)
    draws = [next_token(logits, 1.0, 2, gen) for _ in range(2000)]
    assert set(draws) == {2, 3}
    share = draws.count(3) / len(draws)  # softmax over {2, 3}: e / (1 + e) = 0.731
    assert abs(share - 0.731) < 0.04
    low_t = [next_token(logits, 0.05, 0, gen) for _ in range(200)]
    assert low_t.count(3) > 195
    assert next_token(logits, 0.0, 0, None) == 3
    for bad in (-1.0, float("nan"), float("inf")):  # nan passes `< 0`; torch.multinomial then fails
        with pytest.raises(ValueError, match="temperature must be a finite number"):
            generate_ids(tiny_model(), [1], 2, temperature=bad)
    with pytest.raises(ValueError, match="max-tokens must be >= 0"):
        generate_ids(tiny_model(), [1], -5)
    with pytest.raises(ValueError, match="seed must be in"):  # torch said "Overflow when unpacking long long"
        generate_ids(tiny_model(), [1], 2, seed=10 ** 23)


def test_cli_prints_prompt_then_greedy_continuation(tmp_path_factory, capsys):
    from pretrain.checkpoint import load_model_for_inference
    from pretrain.cli import main
    from pretrain.data.tokenizer import load_tokenizer
    from tests.test_export_hf import quarry_tokenizer, trained_checkpoint

    ckpt, _ = trained_checkpoint(tmp_path_factory, "gpt2")
    tok = load_tokenizer(quarry_tokenizer(tmp_path_factory))  # recorded as data.tokenizer by the run
    prompt = "Emma Woodhouse, handsome, clever, and rich"
    assert main(["generate", "--checkpoint", str(ckpt), "--prompt", prompt, "--max-tokens", "20",
                 "--temperature", "0"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(prompt)

    model, cfg = load_model_for_inference(ckpt)
    ids = tok.encode(prompt)
    new = argmax_by_hand(model, ids, 20, window=cfg.max_seq_len, vocab=cfg.vocab_size)
    if tok.eod_id in new:
        new = new[:new.index(tok.eod_id)]
    assert new  # the check below compares a real continuation
    assert printed == prompt + tok.decode(ids + new)[len(tok.decode(ids)):] + "\n"

    # sampling: seeded, reproducible, through an explicit --tokenizer
    args = ["generate", "--checkpoint", str(ckpt), "--prompt", prompt, "--max-tokens", "20", "--top-k", "50",
            "--seed", "7", "--tokenizer", tok.model_path]
    assert main(args) == 0
    first = capsys.readouterr().out
    assert main(args) == 0
    assert capsys.readouterr().out == first and first.startswith(prompt)


def test_cli_refuses_a_tokenizer_of_another_vocabulary(tmp_path_factory, capsys):
    from pretrain.cli import main
    from tests.test_export_hf import cached, train_quarry_tokenizer, trained_checkpoint

    ckpt, _ = trained_checkpoint(tmp_path_factory, "gpt2")
    other = cached(tmp_path_factory, "tok_bpe_350", lambda d: train_quarry_tokenizer(d, "bpe", 350))
    assert main(["generate", "--checkpoint", str(ckpt), "--prompt", "x", "--tokenizer", other]) == 2
    assert "350 pieces" in capsys.readouterr().err


def test_a_prompt_that_is_not_utf8_is_refused(tmp_path, capsys):
    """Bytes that are not UTF-8 on the command line reach Python as lone surrogates: SentencePiece failed on
    them with a pybind11 cast error, after the model was loaded."""
    from pretrain.cli import main as pretrain_main

    prompt = b"abc\xff".decode("utf-8", "surrogateescape")  # what sys.argv holds for them
    assert pretrain_main(["generate", "--checkpoint", str(tmp_path), "--prompt", prompt]) == 2
    assert "not UTF-8" in capsys.readouterr().err


def test_a_relative_tokenizer_path_missing_from_here_says_so(tmp_path, monkeypatch):
    """The tokenizer path a run records is relative to where training ran: from another directory, eval,
    generate and export-hf said only "not found"."""
    from pretrain import checkpoint as ckpt
    from pretrain.generate import resolve_tokenizer_path

    monkeypatch.setattr(ckpt, "resolve", lambda d: tmp_path)
    monkeypatch.setattr(ckpt, "read_meta", lambda d: {"config": {"data": {"tokenizer": "out/tok.model"}}})
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError, match="relative to the directory training ran from.*--tokenizer PATH"):
        resolve_tokenizer_path(tmp_path)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "tok.model").write_bytes(b"x")
    assert resolve_tokenizer_path(tmp_path) == "out/tok.model"
    assert resolve_tokenizer_path(tmp_path, "given.model") == "given.model"
