"""Validation of a :class:`repro.profiles.profile.Profile`: every range and cross-field constraint, checked
before any work starts; a bad value raises ValueError naming the field, the value and what is allowed.

:func:`validate` checks the sections in a fixed order (testbed, LongRecipe, self-distillation, CDT, ProLong, the
pretrained model as it is (``real``), then the evaluation grid against the target window), so a profile with several
bad values always names the same one.
"""

from __future__ import annotations

import math
from typing import Any

from repro.profiles.cdt import CDTConfig
from repro.profiles.longrecipe import LongRecipeConfig
from repro.profiles.prolong import PL_ARM_NAMES
from repro.profiles.real import validate_real
from repro.profiles.run import validate_run
from repro.profiles.selfdistill import COST_PROXIES, SelfDistillConfig
from repro.profiles.testbed import ExtendConfig

Profile = Any
"""A :class:`repro.profiles.profile.Profile`: not imported, since ``profile.py`` imports this module (no cycle)."""


def _range(value, lo, hi, what: str) -> None:
    if not (lo <= value <= hi):
        raise ValueError(f"{what}={value!r} out of range; allowed: {lo} <= {what} <= {hi}")


def validate(p: Profile) -> Profile:
    """Check every cross-field constraint; raise ValueError naming the bad value."""
    _validate_testbed(p)
    _validate_longrecipe(p.longrecipe)
    _validate_selfdistill(p.selfdistill, p.extend)
    _validate_cdt(p.cdt)
    _validate_prolong(p)
    validate_real(p.real, p.model.pretrained)
    validate_run(p.run)
    e, ev = p.extend, p.eval
    if e.target_window not in ev.lengths:
        raise ValueError(f"extend.target_window={e.target_window} must be one of eval.lengths={ev.lengths}")
    if ev.samples < 1 or ev.batch_size < 1:
        raise ValueError(f"eval.samples={ev.samples}, eval.batch_size={ev.batch_size}; allowed: >= 1")
    return p


def _validate_testbed(p: Profile) -> None:
    """Tokenizer, model, base curriculum, extension and evaluation grid (but the grid's lengths and sample counts,
    checked last by :func:`validate`)."""
    b, e, m, ev = p.base, p.extend, p.model, p.eval
    _range(p.tokenizer.vocab_size, 269, 1_000_000, "tokenizer.vocab_size")
    if m.pretrained is None and m.hidden_size % m.num_heads:
        raise ValueError(f"model.hidden_size={m.hidden_size} must be divisible by model.num_heads={m.num_heads}")
    if m.num_heads % m.num_kv_heads:
        raise ValueError(f"model.num_heads={m.num_heads} must be divisible by model.num_kv_heads={m.num_kv_heads}")
    if m.attn_implementation not in ("sdpa", "eager", "flash_attention_2"):
        raise ValueError(f"model.attn_implementation={m.attn_implementation!r}; "
                         "allowed: sdpa, eager, flash_attention_2")
    if not b.retrieval_lengths or b.retrieval_lengths[-1] != b.window:
        raise ValueError(f"base.retrieval_lengths={b.retrieval_lengths} must end at base.window={b.window}")
    if list(b.retrieval_lengths) != sorted(b.retrieval_lengths):
        raise ValueError(f"base.retrieval_lengths={b.retrieval_lengths} must be increasing")
    if b.task_weights is not None and (len(b.task_weights) != len(b.train_tasks) or min(b.task_weights) <= 0):
        raise ValueError(f"base.task_weights={b.task_weights}; allowed: one positive weight per base.train_tasks "
                         f"({len(b.train_tasks)}: {', '.join(b.train_tasks)})")
    lo, hi = b.copy_period
    if not 1 <= lo <= hi or 2 * hi > b.copy_row_len:
        raise ValueError(f"base.copy_period={b.copy_period}; "
                         f"allowed: 1 <= lo <= hi and 2*hi <= copy_row_len={b.copy_row_len}")
    for name in ("copy_fraction", "lm_fraction", "lm_weight", "context_weight", "advance_em"):
        _range(getattr(b, name), 0.0, 1.0, f"base.{name}")
    _range(e.retrieval_fraction, 0.0, 1.0, "extend.retrieval_fraction")
    for name in ("data_workers", "workers", "sequence_parallel"):
        if getattr(e, name) < 1:
            raise ValueError(f"extend.{name}={getattr(e, name)}; allowed: >= 1")
    _range(e.seed_replicates, 1, 100, "extend.seed_replicates")
    _range(e.min_lr_ratio, 0.0, 1.0, "extend.min_lr_ratio")
    if e.target_window < b.window:
        raise ValueError(f"extend.target_window={e.target_window} must be >= base.window={b.window}")
    for cfg, sec in ((b, "base"), (e, "extend")):
        if cfg.threads < 0:
            raise ValueError(f"{sec}.threads={cfg.threads}; allowed: 0 (leave the process setting) or >= 1")
        if cfg.lr <= 0 or cfg.lr > 1:
            raise ValueError(f"{sec}.lr={cfg.lr} out of range; allowed: 0 < lr <= 1")
    if e.steps < 1 or e.batch_size < 1:
        raise ValueError(f"extend.steps={e.steps}, extend.batch_size={e.batch_size}; allowed: >= 1")
    if e.rope_type != "default" and e.rope_factor is None:
        raise ValueError(f"extend.rope_type={e.rope_type!r} needs extend.rope_factor")
    if any(not 0.0 <= d <= 1.0 for d in ev.depths):
        raise ValueError(f"eval.depths={ev.depths}; allowed: values in [0, 1]")
    if any(not 0.0 <= d <= 1.0 for d in ev.base_depths) or not ev.base_depths or ev.base_samples < 1:
        raise ValueError(f"eval.base_depths={ev.base_depths}, eval.base_samples={ev.base_samples}; "
                         "allowed: at least one depth in [0, 1] and samples >= 1")
    if any(not 0.0 <= d <= 1.0 for d in ev.suite_depths):
        raise ValueError(f"eval.suite_depths={ev.suite_depths}; allowed: values in [0, 1]")
    if ev.suite_samples < 1 or ev.decile_samples < 1 or not ev.seeds or len(set(ev.seeds)) != len(ev.seeds):
        raise ValueError(f"eval.suite_samples={ev.suite_samples}, eval.decile_samples={ev.decile_samples}, "
                         f"eval.seeds={ev.seeds}; allowed: samples >= 1 and distinct seeds (at least one)")
    if any(f < 1 for f in ev.yarn_factors):
        raise ValueError(f"eval.yarn_factors={ev.yarn_factors}; allowed: factors >= 1")
    _range(ev.doable_threshold, 0.0, 1.0, "eval.doable_threshold")


def _validate_longrecipe(lr: LongRecipeConfig) -> None:
    for name in ("sample_ratio", "top_fraction", "replay_token_fraction", "replay_lr_ratio"):
        value = getattr(lr, name)
        if not 0.0 < value <= 1.0:
            raise ValueError(f"longrecipe.{name}={value!r} out of range; allowed: 0 < {name} <= 1")
    if any(not 0.0 < r < 1.0 for r in lr.ratios):
        raise ValueError(f"longrecipe.ratios={lr.ratios}; allowed: values in (0, 1) (100% is FLT)")
    if lr.analysis_texts < 1 or lr.pos_bins < 1 or lr.anchor_min_count < 1 or lr.eval_samples < 1 \
            or lr.yarn_samples < 1 or lr.short_lm_windows < 1:
        raise ValueError(f"longrecipe.analysis_texts={lr.analysis_texts}, pos_bins={lr.pos_bins}, "
                         f"anchor_min_count={lr.anchor_min_count}, eval_samples={lr.eval_samples}, "
                         f"yarn_samples={lr.yarn_samples}, short_lm_windows={lr.short_lm_windows}; allowed: >= 1")
    if lr.cost_steps < 1:
        raise ValueError(f"longrecipe.cost_steps={lr.cost_steps}; allowed: >= 1")
    if lr.anchor_enrichment <= 0:
        raise ValueError(f"longrecipe.anchor_enrichment={lr.anchor_enrichment}; allowed: > 0")
    if len(lr.merge_lambdas) != 2 or any(x < 0 for x in lr.merge_lambdas) or sum(lr.merge_lambdas) <= 0:
        raise ValueError(f"longrecipe.merge_lambdas={lr.merge_lambdas}; allowed: two weights >= 0, not both 0")


def _validate_selfdistill(sd: SelfDistillConfig, e: ExtendConfig) -> None:
    if sd.rope_theta <= 0 or not 1 <= sd.ablation_steps <= e.steps or sd.matched_steps_ratio < 1 \
            or sd.curve_every < 1:
        raise ValueError(f"selfdistill.rope_theta={sd.rope_theta}, ablation_steps={sd.ablation_steps}, "
                         f"matched_steps_ratio={sd.matched_steps_ratio}, curve_every={sd.curve_every}; allowed: "
                         f"rope_theta > 0, 1 <= ablation_steps <= extend.steps={e.steps}, ratio >= 1, curve_every >= 1")
    if not 2 <= sd.longce_window <= e.target_window or not 1 <= sd.longce_stride <= sd.longce_window:
        raise ValueError(f"selfdistill.longce_window={sd.longce_window}, longce_stride={sd.longce_stride}; allowed: "
                         f"2 <= window <= extend.target_window={e.target_window}, 1 <= stride <= window")
    if set(sd.replicate_arms) - set(sd.main_arms):
        raise ValueError(f"selfdistill.replicate_arms={sd.replicate_arms}; allowed: arms of selfdistill.main_arms")
    if any(n > e.target_window or n < 1 for n in sd.eval_lengths) or any(f < 1 for f in sd.yarn_factors) \
            or sd.yarn_samples < 1 or sd.ablation_samples < 1 or sd.cost_steps < 1:
        raise ValueError(f"selfdistill.eval_lengths={sd.eval_lengths}, yarn_factors={sd.yarn_factors}, "
                         f"yarn_samples={sd.yarn_samples}, ablation_samples={sd.ablation_samples}, "
                         f"cost_steps={sd.cost_steps}; allowed: lengths in 1..extend.target_window, factors >= 1, "
                         "counts >= 1")
    _validate_proxy("selfdistill", sd.cost_proxy, sd.proxy_steps)


def _validate_proxy(section: str, name: str, steps: int) -> None:
    if name not in COST_PROXIES:
        raise ValueError(f"{section}.cost_proxy={name!r}; allowed: {', '.join(COST_PROXIES)}")
    if steps < 1:
        raise ValueError(f"{section}.proxy_steps={steps}; allowed: >= 1")


def _validate_cdt(cd: CDTConfig) -> None:
    if not (cd.beta >= 0 and math.isfinite(cd.beta)) or cd.threshold not in ("document", "row"):
        raise ValueError(f"cdt.beta={cd.beta}, cdt.threshold={cd.threshold!r}; allowed: a finite beta >= 0, "
                         "threshold document or row")
    if set(cd.replicate_arms) - set(cd.arms):
        raise ValueError(f"cdt.replicate_arms={cd.replicate_arms}; allowed: arms of cdt.arms={cd.arms}")
    for name in ("curve_every", "task_steps", "task_curve_every", "analysis_samples", "top_k", "top_heads",
                 "map_chunks", "map_samples", "cost_steps", "longppl_docs"):
        if getattr(cd, name) < 1:
            raise ValueError(f"cdt.{name}={getattr(cd, name)}; allowed: >= 1")
    _validate_proxy("cdt", cd.cost_proxy, cd.proxy_steps)
    if cd.analysis_pool not in ("train", "eval"):
        raise ValueError(f"cdt.analysis_pool={cd.analysis_pool!r}; allowed: train, eval")
    if not 0 < cd.task_lr <= 1 or not cd.lr_sweep or min(cd.lr_sweep) <= 0 or not cd.mem_lengths \
            or min(cd.mem_lengths) < 16 or cd.mem_cap_gib <= 0:
        raise ValueError(f"cdt.task_lr={cd.task_lr}, lr_sweep={cd.lr_sweep}, mem_lengths={cd.mem_lengths}, "
                         f"mem_cap_gib={cd.mem_cap_gib}; allowed: 0 < task_lr <= 1, learning rates > 0, lengths >= 16, "
                         "cap > 0")


def _validate_prolong(p: Profile) -> None:
    pl = p.prolong
    names = [n for n, _ in pl.sources]
    if len(set(names)) != len(names) or not names:
        raise ValueError(f"prolong.sources={pl.sources}; allowed: one (name, spec) pair per stream, names unique")
    if bad := sorted(set(pl.long_streams) - set(names)):
        raise ValueError(f"prolong.long_streams names unknown stream(s) {bad}; allowed: {', '.join(names)}")
    mix = dict(pl.mix)
    if sorted(mix) != sorted(names) or any(not 0 <= v <= 1 for v in mix.values()) \
            or abs(sum(mix.values()) - 1) > 1e-6:
        raise ValueError(f"prolong.mix={pl.mix}; allowed: a share in [0, 1] for each of {names}, summing to 1")
    _range(pl.task_share, 0.0, 0.95, "prolong.task_share")
    _range(pl.long_threshold, 0, 10**9, "prolong.long_threshold")
    _range(pl.rope_ntk_multiple, 0.0, 1e4, "prolong.rope_ntk_multiple")
    _range(pl.train_length_factor, 1, 64, "prolong.train_length_factor")
    for name in ("heldout_docs", "eval_samples", "throughput_steps"):
        _range(getattr(pl, name), 1, 10**6, f"prolong.{name}")
    if bad := sorted(set(pl.arms) - set(PL_ARM_NAMES)):
        raise ValueError(f"prolong.arms names unknown arm(s) {bad}; allowed: {', '.join(PL_ARM_NAMES)}")
    if bad := sorted(set(pl.replicate_arms) - set(pl.arms)):
        raise ValueError(f"prolong.replicate_arms={pl.replicate_arms}; allowed: arms of prolong.arms")
    if p.extend.batch_size % pl.train_length_factor:
        raise ValueError(f"extend.batch_size={p.extend.batch_size} is not divisible by prolong.train_length_factor="
                         f"{pl.train_length_factor}; allowed: a factor dividing the batch (same tokens per step)")
    if any(w < 1 for w in pl.throughput_workers):
        raise ValueError(f"prolong.throughput_workers={pl.throughput_workers}; allowed: counts >= 1")
