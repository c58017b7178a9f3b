"""The raw Azure LLM inference trace's columns (TIMESTAMP, ContextTokens, GeneratedTokens) in
podsim's request traces, beside Vidur's (arrived_at, num_prefill_tokens, num_decode_tokens).
The fixtures are written by hand here; the expected arrivals are their timestamps' differences,
worked out in the comments."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from podsim.cli import main
from podsim.errors import InputError
from podsim.serving.llm.requests import Request, load_requests, read_trace

HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def _csv(tmp_path: Path, text: str, name: str = "raw.csv") -> Path:
    f = tmp_path / name
    f.write_text(text)
    return f


def test_2023_timestamps_with_seven_fractional_digits(tmp_path: Path) -> None:
    # three rows 0.5 s apart: 46.6805900 -> 47.1805900 -> 47.6805900
    f = _csv(
        tmp_path,
        HEADER + "2023-11-16 18:15:46.6805900,4808,10\n"
        "2023-11-16 18:15:47.1805900,3180,8\n"
        "2023-11-16 18:15:47.6805900,110,27\n",
    )
    assert read_trace(f) == [
        Request(0, 0, 4808, 10),
        Request(1, 500_000_000, 3180, 8),
        Request(2, 1_000_000_000, 110, 27),
    ]


def test_exact_ns_across_minutes_days_and_years(tmp_path: Path) -> None:
    # 23:59:59.9999999 -> next day 00:00:00.0000001: 200 ns later (7 digits = 100 ns steps);
    # then 2024-01-01 00:00:01, from 2023-12-31 23:59:59.9999999: 1.0000001 s = 1,000,000,100 ns
    f = _csv(
        tmp_path, HEADER + "2023-12-31 23:59:59.9999999,1,1\n2024-01-01 00:00:00.0000001,2,2\n2024-01-01 00:00:01,3,3\n"
    )
    assert [r.arrival_ns for r in read_trace(f)] == [0, 200, 1_000_000_100]
    # nanosecond digits are kept, and those beyond are cut: .123456789 and .1234567891 -> same ns
    f = _csv(
        tmp_path,
        HEADER + "2023-11-16 18:00:00,1,1\n2023-11-16 18:00:00.123456789,1,1\n2023-11-16 18:00:00.1234567891,1,1\n",
    )
    assert [r.arrival_ns for r in read_trace(f)] == [0, 123_456_789, 123_456_789]


def test_2024_timestamps_with_utc_offsets(tmp_path: Path) -> None:
    # 2024's release: six digits and +00:00, some without a fraction (pandas' "mixed" format)
    f = _csv(
        tmp_path,
        HEADER + "2024-05-12 00:00:00+00:00,1452,3\n"
        "2024-05-12 00:00:00.001163+00:00,584,3\n"
        "2024-05-12 00:00:00.157988+00:00,862,38\n",
    )
    assert [r.arrival_ns for r in read_trace(f)] == [0, 1_163_000, 157_988_000]
    # an offset moves the instant: 02:00:00+02:00 is 00:00:00Z, 01:00:00+00:00 one hour later,
    # and a time without an offset is UTC: 2024-05-12T01:30:00 is 1.5 h after the first
    f = _csv(tmp_path, HEADER + "2024-05-12 02:00:00+02:00,1,1\n2024-05-12 01:00:00Z,1,1\n2024-05-12T01:30:00,1,1\n")
    assert [r.arrival_ns for r in read_trace(f)] == [0, 3_600_000_000_000, 5_400_000_000_000]


def test_plain_seconds(tmp_path: Path) -> None:
    # seconds from any origin, taken exactly: 1700000000.1 -> .6 -> 1700000001.1 (no float
    # rounding at epoch sizes, where a double's step is about 240 ns)
    f = _csv(tmp_path, HEADER + "1700000000.1,5,2\n1700000000.6,6,3\n1700000001.1,7,4\n")
    assert read_trace(f) == [Request(0, 0, 5, 2), Request(1, 500_000_000, 6, 3), Request(2, 1_000_000_000, 7, 4)]
    # from a negative start; 1e-9 s = 1 ns
    f = _csv(tmp_path, HEADER + "-2,1,1\n-1.999999999,1,1\n0,1,1\n")
    assert [r.arrival_ns for r in read_trace(f)] == [0, 1, 2_000_000_000]


def test_extra_columns_prefixes_limit_and_a_byte_order_mark(tmp_path: Path) -> None:
    # columns in another order, a column podsim ignores, a BOM before the header, a blank line
    f = tmp_path / "raw.csv"
    f.write_bytes(
        "\ufeffGeneratedTokens,Deployment,ContextTokens,TIMESTAMP,prefix_id,prefix_tokens\n"
        "5,a,100,2023-11-16 18:15:46.5,3,64\n\n"
        "2,b,80,2023-11-16 18:15:47,,\n"
        "9,c,90,2023-11-16 18:15:48,,\n".encode()
    )
    assert read_trace(f) == [
        Request(0, 0, 100, 5, 3, 64),
        Request(1, 500_000_000, 80, 2),
        Request(2, 1_500_000_000, 90, 9),
    ]
    assert read_trace(f, limit=2) == read_trace(f)[:2]
    assert load_requests(str(f), 1) == [Request(0, 0, 100, 5, 3, 64)]


def test_bad_timestamps_are_refused_naming_the_row(tmp_path: Path) -> None:
    def refused(rows: str, pattern: str) -> None:
        with pytest.raises(InputError, match=pattern):
            read_trace(_csv(tmp_path, HEADER + rows))

    refused(
        "2023-11-16 18:15:46,1,1\nyesterday,1,1\n",
        r"raw\.csv: row 2 \(line 3\), column TIMESTAMP: TIMESTAMP must be a date and time .* as the first "
        r"row's, got 'yesterday'",
    )
    refused(
        "noon,1,1\n",
        r"row 1 \(line 2\), column TIMESTAMP: TIMESTAMP must be a date and time .* or a number "
        r"of seconds, got 'noon'",
    )
    refused(
        "2023-11-16 18:15:46,1,1\n2023-02-30 00:00:00,1,1\n",
        r"row 2 \(line 3\), column TIMESTAMP: TIMESTAMP '2023-02-30 00:00:00' is not a valid date",
    )
    refused("2023-11-16 25:00:00,1,1\n", r"row 1 .*'2023-11-16 25:00:00' is not a valid date")
    refused("2023-11-16 18:00:00+25:00,1,1\n", r"row 1 .*UTC offset out of range")
    # the kinds do not mix
    refused("12.5,1,1\n2023-11-16 18:15:46,1,1\n", r"row 2 .*must be a number of seconds as the first row's")
    refused("nan,1,1\n", r"row 1 .*got 'nan'")
    refused("1,1,1\ninf,1,1\n", r"row 2 .*got 'inf'")
    # out of time order: refused, not sorted
    refused(
        "2023-11-16 18:15:47.0,1,1\n2023-11-16 18:15:46.5,1,1\n",
        r"row 2 \(line 3\), column TIMESTAMP: TIMESTAMP '2023-11-16 18:15:46.5' is 0.5 s before the previous "
        r"row's: rows must be in time order",
    )
    # more than 9.2e8 s (29 years) after the first
    refused("1990-01-01 00:00:00,1,1\n2023-11-16 18:15:46,1,1\n", r"row 2 .*after the first row's, more than 9.2e\+08")


def test_bad_lengths_are_refused_as_in_vidur_columns(tmp_path: Path) -> None:
    # 0 output tokens: refused in both column sets alike (every request generates a token)
    for text, col in (
        (HEADER + "2023-11-16 18:15:46,10,0\n", "GeneratedTokens"),
        ("arrived_at,num_prefill_tokens,num_decode_tokens\n0,10,0\n", "num_decode_tokens"),
    ):
        with pytest.raises(
            InputError,
            match=rf"row 1 \(line 2\), column {col}: {col} must be a positive whole "
            r"number, got '0' \(every request generates at least one token",
        ):
            read_trace(_csv(tmp_path, text))
    with pytest.raises(InputError, match=r"row 2 \(line 3\), column ContextTokens: .* got '-4'"):
        read_trace(_csv(tmp_path, HEADER + "2023-11-16 18:15:46,5,3\n2023-11-16 18:15:47,-4,2\n"))
    with pytest.raises(InputError, match=r"row 1 \(line 2\), column GeneratedTokens: .* got '3.5'"):
        read_trace(_csv(tmp_path, HEADER + "2023-11-16 18:15:46,5,3.5\n"))
    with pytest.raises(InputError, match=r"row 1 \(line 2\): expected 3 fields, got 2"):
        read_trace(_csv(tmp_path, HEADER + "2023-11-16 18:15:46,5\n"))
    with pytest.raises(InputError, match="the trace has no requests"):
        read_trace(_csv(tmp_path, HEADER))


def test_missing_columns_name_both_sets(tmp_path: Path) -> None:
    both = r"TIMESTAMP, ContextTokens, GeneratedTokens \(the raw Azure trace\)"
    vidur = r"arrived_at, num_prefill_tokens, num_decode_tokens \(Vidur's processed trace\)"
    # closer to the raw set: its missing column first, with a did-you-mean
    with pytest.raises(
        InputError,
        match=rf"raw\.csv: header: missing column 'GeneratedTokens' \(found "
        rf"'GeneratedToken'\?\); a trace needs {both} or {vidur}",
    ):
        read_trace(_csv(tmp_path, "TIMESTAMP,ContextTokens,GeneratedToken\n2023-11-16 18:15:46,5,3\n"))
    # closer to Vidur's (as before)
    with pytest.raises(
        InputError,
        match=rf"header: missing column 'num_decode_tokens'; a trace needs {vidur} or "
        rf"{both}",
    ):
        read_trace(_csv(tmp_path, "arrived_at,num_prefill_tokens\n0,5\n"))
    # neither: Vidur's set named first
    with pytest.raises(
        InputError,
        match=r"missing columns 'arrived_at', 'num_prefill_tokens', 'num_decode_tokens'; "
        r".*\(found: a, b\)",
    ):
        read_trace(_csv(tmp_path, "a,b\n1,2\n"))
    # the column names are case-sensitive, as the Azure files spell them
    with pytest.raises(InputError, match=r"missing column 'TIMESTAMP' \(found 'timestamp'\?\)"):
        read_trace(_csv(tmp_path, "timestamp,ContextTokens,GeneratedTokens\n0,5,3\n"))


def test_both_sets_read_vidurs_columns(tmp_path: Path) -> None:
    f = _csv(
        tmp_path,
        "arrived_at,num_prefill_tokens,num_decode_tokens,TIMESTAMP,ContextTokens,GeneratedTokens\n0.25,5,3,bad,7,0\n",
    )
    assert read_trace(f) == [Request(0, 250_000_000, 5, 3)]


def test_serve_llm_runs_a_raw_azure_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # six requests, 0.2 s apart, on llama3-8b
    rows = "".join(f"2023-11-16 18:15:{46 + i * 0.2:010.7f},{100 + 10 * i},{4 + i}\n" for i in range(6))
    assert rows.startswith("2023-11-16 18:15:46.0000000,100,4\n2023-11-16 18:15:46.2000000,110,5\n")
    f = _csv(tmp_path, HEADER + rows)
    out = tmp_path / "r.json"
    assert main(["serve-llm", "--model", "llama3-8b", "--gpu", "h100", "--workload", str(f), "--json", str(out)]) == 0
    d = json.loads(out.read_text())
    assert [r["arrival_s"] for r in d["requests"]] == pytest.approx([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
    assert [r["prompt_tokens"] for r in d["requests"]] == [100, 110, 120, 130, 140, 150]
    assert [r["output_tokens"] for r in d["requests"]] == [4, 5, 6, 7, 8, 9]
    assert "TTFT" in capsys.readouterr().out
    # a bad row: exit status 2 and the file, row and column named
    bad = _csv(tmp_path, HEADER + "2023-11-16 18:15:46,100,4\n2023-11-16 18:15:45,100,4\n", "bad.csv")
    assert main(["serve-llm", "--model", "llama3-8b", "--gpu", "h100", "--workload", str(bad)]) == 2
    assert "bad.csv: row 2 (line 3), column TIMESTAMP" in capsys.readouterr().err
