"""One place that turns an arm name and a profile into what its training needs: the method, the model's config
changes and the :class:`repro.train.TrainConfig`. The training stages and the command line
(``python -m repro train``, ``reproduce --dry-run``) build arms through here, so both train an arm the same way.

- :func:`build_method`: the method of any trained arm (extension arms, self-distillation ``rp_*``, CDT, ProLong),
  through each family's builder (:func:`repro.stages.extension.extension_method`,
  :func:`repro.stages.selfdistill.selfdistill_method`, :func:`repro.stages.cdt.cdt_method`,
  :func:`repro.stages.prolong.prolong_method`).
- :func:`model_settings`: the ``rope``, ``max_positions`` and ``overrides`` of :func:`repro.models.load_model`.
- :func:`train_config`: the optimisation settings (steps, schedule, precision) of the arm.
- :func:`prepare_model`: what an arm changes on the loaded model before training (ProLong's document masks).
- :func:`scaled_profile`: a profile resized to another target window, batch and step count with every
  cross-field constraint kept (the command line's runs and the dry run's one-step checks).
"""

from __future__ import annotations

from typing import Any

from repro.profiles import Profile

CLI_METHODS: dict[str, str] = {
    "flt": "flt", "pose": "pose", "rpes": "rpes", "longrecipe": "longrecipe",
    "selfdistill": "rp_skip", "longce": "rp_longce", "cdt": "cdt", "prolong": "prolong",
}
"""Method names of the command line -> the arm they train (self-distillation is the skip view, LongCE the
self-distillation comparison's LongCE arm)."""


def family(arm: str) -> str:
    """``prolong``, ``cdt``, ``selfdistill`` or ``extension``: which stage trains arm ``arm``."""
    from repro.methods.arms import cd_arm, pl_arm, rp_arm

    if pl_arm(arm) is not None:
        return "prolong"
    if cd_arm(arm) is not None:
        return "cdt"
    if rp_arm(arm) is not None:
        return "selfdistill"
    from repro.methods import extension_spec

    extension_spec(arm)  # ValueError naming the allowed arms
    return "extension"


def build_method(p: Profile, arm: str, tokenizer, corpus_rows=None, streams=None, anchors=None,
                 seed: int | None = None):
    """The method of arm ``arm`` with ``p``'s settings. ``corpus_rows`` (:class:`repro.data.synthetic.CorpusRows`)
    feed every arm but ProLong's, which reads ``streams`` (a :func:`repro.stages.prolong.build_streams` folder or
    :class:`repro.data.streams.TokenStream` objects named as ``prolong.sources``); ``anchors`` are the anchor token
    ids of the arms that select anchor sentences."""
    kind = family(arm)
    if kind == "prolong":
        from repro.stages.prolong import prolong_method

        if streams is None:
            raise ValueError(f"arm {arm!r} reads ProLong streams; allowed: streams= a build_streams folder or "
                             "TokenStream objects")
        return prolong_method(p, arm, tokenizer, streams, seed=seed)
    if corpus_rows is None:
        raise ValueError(f"arm {arm!r} needs corpus_rows (repro.data.synthetic.CorpusRows)")
    if kind == "cdt":
        from repro.stages.cdt import cdt_method

        return cdt_method(p, arm, tokenizer, corpus_rows, seed=seed)
    if kind == "selfdistill":
        from repro.stages.selfdistill import selfdistill_method

        return selfdistill_method(p, arm, tokenizer, corpus_rows, seed=seed)
    from repro.stages.extension import extension_method

    return extension_method(p, arm, tokenizer, corpus_rows, anchors, seed=seed)


def model_settings(p: Profile, arm: str) -> dict[str, Any]:
    """Keyword arguments of :func:`repro.models.load_model` for arm ``arm``: ``rope`` (the arm's RoPE), and where
    the arm needs them ``max_positions`` and config ``overrides``."""
    from repro.models import rope_parameters

    kind, e, sd = family(arm), p.extend, p.selfdistill
    if kind == "prolong":
        from repro.stages.prolong import arm_length, arm_rope_theta

        return {"rope": rope_parameters("default", arm_rope_theta(p, arm)), "max_positions": arm_length(p, arm)[0]}
    if kind == "cdt":
        return {"rope": rope_parameters("default", sd.rope_theta)}
    if kind == "selfdistill":
        from repro.methods.arms import rp_arm

        spec = rp_arm(arm).spec
        out: dict[str, Any] = {"rope": rope_parameters("default", sd.rope_theta),
                               "max_positions": spec.max_index(e.target_window) + 1}
        if spec.perturbation == "dropout":
            out["overrides"] = {"attention_dropout": spec.dropout}
        return out
    if e.rope_type != "default" or e.rope_theta is not None:
        theta = e.rope_theta or p.model.rope_theta
        return {"rope": rope_parameters(e.rope_type, theta, e.rope_factor, p.base.window)}
    return {"rope": None}


def train_config(p: Profile, arm: str, **overrides: Any):
    """The arm's :class:`repro.train.TrainConfig` (cosine over ``extend.steps``; self-distillation's schedules and
    the comparison's precision for the ``rp_*`` and CDT arms); ``overrides`` replace fields (``max_steps`` too)."""
    from repro.train import TrainConfig

    kind, e = family(arm), p.extend
    max_steps = e.steps
    if kind == "selfdistill":
        from repro.stages.selfdistill import rp_schedule

        max_steps = rp_schedule(p, arm)[0]
    if kind in ("selfdistill", "cdt"):
        overrides = {"bf16": p.selfdistill.bf16, **overrides}
    return TrainConfig.from_section(e, overrides.pop("max_steps", max_steps), **{"schedule": "cosine", **overrides})


def prepare_model(p: Profile, method, model) -> None:
    """What a method changes on the model before training: with ProLong's document masks under ``sdpa``, each
    packed document is attended alone (:func:`repro.attention.doc_masked.use_doc_masked_attention`)."""
    attn = getattr(model.config, "_attn_implementation", None) or p.model.attn_implementation
    if getattr(method, "doc_masks", False) and attn == "sdpa":
        from repro.attention.doc_masked import use_doc_masked_attention

        use_doc_masked_attention(model)


def scaled_profile(p: Profile, target: int, *, base_window: int | None = None, batch_size: int | None = None,
                   steps: int | None = None, lr: float | None = None, seed: int | None = None,
                   **sections: dict[str, Any]) -> Profile:
    """``p`` at target window ``target`` (base window ``base_window``, default ``min(base.window, target)``), with
    ``extend``'s batch, steps, lr and seed replaced when given, and the fields tied to them moved along: the
    evaluation lengths, the base curriculum's last length, LongCE's window (at most the base window, stride a
    quarter of it), the self-distillation evaluation lengths and early stop, ProLong's long-training factor (1
    when it does not divide the batch). ``sections`` are further overrides (``extend={"threads": 0}``)."""
    if target < 2:
        raise ValueError(f"target={target}; allowed: >= 2 tokens")
    window = min(base_window or p.base.window, target)
    e = {"target_window": target, **{k: v for k, v in (("batch_size", batch_size), ("steps", steps), ("lr", lr),
                                                       ("seed", seed)) if v is not None}}
    e.update(sections.pop("extend", {}))
    n_steps, n_batch = e.get("steps", p.extend.steps), e.get("batch_size", p.extend.batch_size)
    sd_window = min(p.selfdistill.longce_window, window)
    factor = p.prolong.train_length_factor if n_batch % p.prolong.train_length_factor == 0 else 1
    parts: dict[str, dict[str, Any]] = {
        "base": {"window": window, "retrieval_lengths": (window,)},
        "extend": e,
        "eval": {"lengths": tuple(sorted({window, target}))},
        "selfdistill": {"longce_window": sd_window, "longce_stride": max(1, min(p.selfdistill.longce_stride,
                                                                               sd_window // 4 or 1)),
                        "eval_lengths": (target,), "ablation_steps": min(p.selfdistill.ablation_steps, n_steps)},
        "prolong": {"train_length_factor": factor},
    }
    for sec, values in sections.items():
        parts[sec] = {**parts.get(sec, {}), **values}
    return p.override(**parts)
