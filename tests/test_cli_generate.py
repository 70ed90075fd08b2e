"""`relax-edge generate` and `relax-edge bench --generate` over the hand-made
decoder of tests/deploy/toy_decoder.py: tokens streamed (ids, or text through
a tokenizer), the statistics, --json, and one-line errors (exit 2 for usage,
1 for the rest)."""

import json

import pytest

import relax_edge as rxe
from relax_edge.cli import main
from tests.deploy.toy_decoder import CONTEXT, VOCAB, greedy, toy_decoder


@pytest.fixture(scope="module")
def arts(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli_generate")
    step = rxe.build(toy_decoder(), board="host", out_dir=root / "toy", name="toy", quiet=True, optimize=False)
    plain = rxe.build(toy_decoder(with_step=False), board="host", out_dir=root / "plain", name="plain", quiet=True,
                      optimize=False)
    return {"toy": step.out_dir, "plain": plain.out_dir, "root": root}


@pytest.fixture(scope="module")
def tokenizer(arts):
    """A word-level tokenizer.json of the toy's vocabulary: w0 .. w10."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    tok = Tokenizer(models.WordLevel({f"w{i}": i for i in range(VOCAB)}, unk_token="w0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    path = arts["root"] / "tokenizer.json"
    tok.save(str(path))
    return path


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_generate_streams_ids_and_prints_the_statistics(arts, capsys):
    code, out, err = run(capsys, "generate", arts["toy"], "--prompt-ids", "1,2,3", "--max-new-tokens", "6")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == [str(t) for t in greedy([1, 2, 3], 6)]
    assert "6 tokens (prompt 3, stopped by max_new_tokens)" in lines[1]
    assert "TTFT" in lines[1] and "prefill" in lines[1] and "decode" in lines[1] and "tok/s" in lines[1]
    assert "generating 6 tokens with toy on host" in err


def test_generate_with_a_tokenizer_and_a_stop_token(arts, tokenizer, capsys):
    want = greedy([1, 2, 3], 6)
    code, out, err = run(capsys, "generate", arts["toy"], "--prompt", "w1 w2 w3", "--tokenizer", tokenizer,
                         "--max-new-tokens", "6", "--stop", str(want[1]), "--temperature", "0")
    assert code == 0, err
    assert out.splitlines()[0] == " ".join(f"w{t}" for t in want[:2])
    assert "stopped by stop_token" in out


def test_sampled_generation_is_reproducible(arts, capsys):
    argv = ["generate", arts["toy"], "--prompt-ids", "4", "--max-new-tokens", "8", "--temperature", "1.2",
            "--top-k", "6", "--top-p", "0.9", "--seed", "3"]
    first = run(capsys, *argv)[1].splitlines()[0]
    assert run(capsys, *argv)[1].splitlines()[0] == first and len(first.split()) == 8


@pytest.mark.parametrize("argv, status, message", [
    (["generate", "{toy}"], 2, "give the prompt as --prompt-ids 1,2,3 or as --prompt TEXT"),
    (["generate", "{toy}", "--prompt", "w1"], 2, "--prompt TEXT needs --tokenizer"),
    (["generate", "{toy}", "--prompt-ids", "1,x"], 2, "--prompt-ids: expected comma-separated token ids"),
    (["generate", "{toy}", "--prompt-ids", "1", "--max-new-tokens", "0"], 2, "--max-new-tokens: expected an integer"),
    (["generate", "{toy}", "--prompt-ids", "1", "--max-context", "8"], 2, "--max-context is for compiling a model"),
    (["generate", "{plain}", "--prompt-ids", "1"], 1, "not built from a KV-cache decoder"),
    (["generate", "{toy}", "--prompt-ids", "1", "--max-new-tokens", "40"], 1,
     f"RXE_ERR_BOUND: generate: context bound max_context={CONTEXT} reached"),
    (["generate", "{toy}", "--prompt-ids", "1", "--top-p", "2"], 1, "top_p must be a number in [0, 1]"),
    (["generate", "{root}/missing", "--prompt-ids", "1"], 1, "no such file or directory"),
    (["bench", "{toy}", "--generate", "--profile"], 2, "bench --generate takes"),
])
def test_errors_are_one_line(arts, capsys, argv, status, message):
    code, _, err = run(capsys, *[a.format(**arts) for a in argv])
    assert code == status
    last = err.strip().splitlines()[-1]
    assert last.startswith("relax-edge: error: ") and message in last, err


def test_bench_generate_reports_medians_and_json(arts, capsys, tmp_path):
    code, out, err = run(capsys, "bench", arts["toy"], "--generate", "--prompt-len", "5", "--new-tokens", "4",
                         "--repeat", "3", "--warmup", "1", "--json", tmp_path / "gen.json")
    assert code == 0, err
    assert "generation of 4 tokens after a prompt of 5, medians over 3 runs" in out
    assert "prefill" in out and "decode" in out and "tok/s" in out
    report = json.loads((tmp_path / "gen.json").read_text())["generate"]
    assert report["prompt_tokens"] == 5 and report["new_tokens"] == 4 and report["repeat"] == 3
    assert len(report["runs"]) == 3 and report["decode_tok_s"] > 0 and report["prefill_tok_s"] > 0
    assert all(len(r["token_ms"]) == 4 for r in report["runs"])
