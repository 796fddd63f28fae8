# %% [markdown]
# # Two fabricbench runs side by side
#
# Loads two CSVs written by the benchmarks' `--csv` with a plain `pd.read_csv`,
# computes busbw as a percentage of the link limit recorded with each run, lists
# the busbw and p99 deltas of the rows both runs measured, and draws busbw vs
# message size with matplotlib.
#
# - Headless: `python3 scripts/compare.py BASELINE.csv CANDIDATE.csv [OUT_DIR]`
#   (CI runs it so against CSVs it has just produced).
# - In Jupyter or VS Code (cells are marked `# %%`): set `BASELINE` and
#   `CANDIDATE` in the next cell.

# %%
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")  # headless: files, no window
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

if "ipykernel" not in sys.modules and len(sys.argv) >= 3:
    BASELINE, CANDIDATE = sys.argv[1], sys.argv[2]
    OUT = pathlib.Path(sys.argv[3] if len(sys.argv) > 3 else "compare-out")
else:
    BASELINE, CANDIDATE = "baseline.csv", "candidate.csv"
    OUT = pathlib.Path("compare-out")
OUT.mkdir(parents=True, exist_ok=True)

# %% [markdown]
# ## Load
# One row per measured size and placement. `schema_version` says which columns
# mean what; this notebook reads version 1.

# %%
runs = {}
for path in (BASELINE, CANDIDATE):
    df = pd.read_csv(path)
    versions = set(df["schema_version"])
    if versions != {1}:
        raise SystemExit(f"{path}: schema_version {sorted(versions)}, this notebook reads 1")
    runs[pathlib.Path(path).stem] = df
if len(runs) != 2:
    raise SystemExit("give two files with different names")
(base_name, base), (cand_name, cand) = runs.items()
for name, df in runs.items():
    print(f"{name}: {len(df)} rows, {df['collective'].nunique()} collective(s), "
          f"{sorted(df['nranks'].unique())} ranks, backend {sorted(df['backend'].unique())}")

# %% [markdown]
# ## Percent of limit
# `limit_gbs` is the lowest link limit of the run (per direction, 1 GB/s = 1e9
# B/s), empty when the run had none. busbw / limit is recomputed here and must
# agree with the CSV's own `pct_of_limit`.

# %%
for name, df in runs.items():
    df["pct"] = 100.0 * df["busbw_gbs"] / df["limit_gbs"]
    if not np.allclose(df["pct"], df["pct_of_limit"], equal_nan=True, rtol=1e-6):
        raise SystemExit(f"{name}: pct_of_limit disagrees with busbw_gbs / limit_gbs")
    best = df.loc[df["busbw_gbs"].idxmax()]
    if pd.isna(best["limit_gbs"]):
        print(f"{name}: best busbw {best['busbw_gbs']:.3f} GB/s at {best['size_bytes']} B (no limit)")
    else:
        print(f"{name}: best busbw {best['busbw_gbs']:.3f} GB/s at {best['size_bytes']} B = "
              f"{best['pct']:.1f}% of {best['limit_name']} ({best['limit_gbs']} GB/s)")

# %% [markdown]
# ## Deltas
# Rows are matched as `compare` matches them: collective, datatype, op,
# placement, size and rank count; repeated rows (cycles, roots) are averaged.

# %%
KEY = ["collective", "datatype", "redop", "placement", "size_bytes", "nranks"]
mean = lambda df: df.groupby(KEY)[["busbw_gbs", "p99_us"]].mean()
both = mean(base).join(mean(cand), lsuffix="_base", rsuffix="_cand", how="inner")
both["busbw_delta_pct"] = 100.0 * (both["busbw_gbs_cand"] / both["busbw_gbs_base"] - 1.0)
both["p99_delta_pct"] = 100.0 * (both["p99_us_cand"] / both["p99_us_base"] - 1.0)
unmatched = len(mean(base)) + len(mean(cand)) - 2 * len(both)
print(f"{len(both)} matched rows, {unmatched} unmatched")
print(both.round(3).to_string() if len(both) else "no row of the two runs matches")

# %% [markdown]
# ## busbw vs message size
# One line per run and placement (in-place dashed), each run's limit as a
# dotted line, the best point of each line marked with its % of limit.

# %%
collectives = sorted(set(base["collective"]) | set(cand["collective"]))
fig, axes = plt.subplots(len(collectives), 1, figsize=(12, 8 * len(collectives)), squeeze=False)
for ax, coll in zip(axes[:, 0], collectives):
    for name, df in runs.items():
        rows = df[df["collective"] == coll]
        for placement, part in rows.groupby("placement"):
            line = part.groupby("size_bytes")[["busbw_gbs", "pct"]].mean()
            style = "--" if placement == "in-place" else "-"
            (drawn,) = ax.plot(line.index, line["busbw_gbs"], style, marker="o",
                               label=f"{name} {placement}")
            best = line["busbw_gbs"].idxmax()
            note = (f"{line.loc[best, 'pct']:.0f}%" if not pd.isna(line.loc[best, "pct"])
                    else f"{line.loc[best, 'busbw_gbs']:.2f} GB/s")
            ax.annotate(note, (best, line.loc[best, "busbw_gbs"]), textcoords="offset points",
                        xytext=(-10, 8), ha="right", color=drawn.get_color())
        for limit_name, gbs in rows[["limit_name", "limit_gbs"]].dropna().drop_duplicates().values:
            ax.axhline(gbs, linestyle=":", color="darkred")
            ax.annotate(f"limit: {limit_name} {gbs:g} GB/s", (0.01, gbs), xycoords=("axes fraction", "data"),
                        textcoords="offset points", xytext=(0, 4), color="darkred")
    ax.set_xscale("log", base=2)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("message size (bytes, log2 scale)")
    ax.set_ylabel("busbw (GB/s, 1 GB/s = 1e9 B/s)")
    ax.set_title(f"{coll}: bus bandwidth vs message size")
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=4, frameon=False)
fig.tight_layout()
png = OUT / "busbw.png"
fig.savefig(png, dpi=100)
print(f"wrote {png}")
