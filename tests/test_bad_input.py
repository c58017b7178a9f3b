"""Bad input gives a one-line error naming the flag, file or field -- never a traceback, a hang or
a silent answer (issue 13, item 5)."""

from __future__ import annotations

import json
import math

import pytest

from podsim.cli import main
from podsim.errors import InputError
from podsim.hardware.cluster import MAX_GPUS, build_fabric, load_cluster
from podsim.llm.model import from_hf_config
from podsim.units import parse_bandwidth, parse_size, parse_time_ns


@pytest.mark.parametrize(
    "argv, flag",
    [
        (["llm", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "8", "--seq-len", "0"], "--seq-len"),
        (["llm", "--model", "llama3-8b", "--gpus", "-8", "--global-batch", "8"], "--gpus"),
        (["llm", "--model", "llama3-8b", "--gpus", "8", "--tp", "1.5", "--global-batch", "8"], "--tp"),
        (["llm", "--model", "llama3-8b", "--gpus", "8", "--global-batch", "99999999999"], "--global-batch"),
        (["simulate", "--triosim", "x", "--bucket-mb", "nan"], "--bucket-mb"),
        (["simulate", "--triosim", "x", "--compute-scale", "inf"], "--compute-scale"),
        (["serve", "--duration", "-1"], "--duration"),
        (["collective", "all_reduce", "--cluster", "dgx-h100", "--gpus", "0"], "--gpus"),
        (["inspect", "x", "--ranks", "zero"], "--ranks"),
    ],
)
def test_numeric_flags_are_checked_alike(argv: list[str], flag: str, capsys) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert flag in err and "expected a" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "parse, value",
    [
        (parse_size, math.inf),
        (parse_size, math.nan),
        (parse_size, "1e999 GB"),
        (parse_size, "1e300 GB"),
        (parse_time_ns, "inf s"),
        (parse_time_ns, "1e300 s"),
        (parse_time_ns, -1),
        (parse_bandwidth, "1e400 GB/s"),
        (parse_bandwidth, "nan GB/s"),
        (parse_bandwidth, "1e-300 GB/s"),
        (parse_bandwidth, 0),
    ],
)
def test_units_refuse_non_finite_and_absurd(parse, value) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError) as e:
        parse(value, "f.yaml", "intra_node.bandwidth")
    assert "f.yaml" in str(e.value) and "intra_node.bandwidth" in str(e.value)


def test_infinite_bandwidth_in_a_cluster_file(tmp_path, capsys) -> None:
    from importlib import resources

    text = resources.files("podsim.hardware").joinpath("presets/dgx-h100.yaml").read_text()
    p = tmp_path / "c.yaml"
    p.write_text(text.replace("bandwidth: 450 GB/s", "bandwidth: 1e400 GB/s"))
    assert main(["collective", "all_reduce", "--cluster", str(p), "--gpus", "16"]) == 2
    err = capsys.readouterr().err
    assert str(p) in err and "intra_node.bandwidth" in err and "finite" in err


def test_gpu_counts_beyond_a_fabric_are_refused_at_once() -> None:
    spec = load_cluster("dgx-h100")
    with pytest.raises(InputError, match="1 to 1,048,576"):
        build_fabric(spec, 10**9)  # used to hang building a billion-GPU fabric
    with pytest.raises(InputError):
        build_fabric(spec, 0)
    assert MAX_GPUS == 1 << 20


BASE = {
    "hidden_size": 4096,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "intermediate_size": 11008,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "hidden_act": "silu",
}


@pytest.mark.parametrize(
    "change, field",
    [
        ({"hidden_size": 4096.5}, "hidden_size"),
        ({"num_hidden_layers": 32.5}, "num_hidden_layers"),
        ({"num_hidden_layers": True}, "num_hidden_layers"),
        ({"hidden_size": "4096"}, "hidden_size"),
        ({"vocab_size": None}, "vocab_size"),
        ({"intermediate_size": 1e300}, "intermediate_size"),
        ({"num_attention_heads": 8192}, "attention heads"),
        ({"num_attention_heads": 3}, "attention heads"),
        ({"hidden_act": "wobble"}, "hidden_act"),
        ({"hidden_act": None}, "hidden_act"),
        ({"num_key_value_heads": 5}, "KV heads"),
        ({"num_hidden_layers": 10**7}, "layers"),
    ],
)
def test_hf_config_values_are_checked(tmp_path, change: dict, field: str) -> None:
    p = tmp_path / "config.json"
    p.write_text(json.dumps({**BASE, **change}))
    with pytest.raises(InputError) as e:
        from_hf_config(p)
    assert str(p) in str(e.value) and field in str(e.value)


def test_hf_config_whole_floats_and_gelu_variants_are_fine(tmp_path) -> None:
    p = tmp_path / "config.json"
    p.write_text(json.dumps({**BASE, "hidden_size": 4096.0, "hidden_act": "gelu_new"}))
    m = from_hf_config(p)
    assert m.hidden == 4096 and m.activation == "gelu"
