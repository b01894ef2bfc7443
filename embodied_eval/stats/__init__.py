"""Statistics: every number the harness prints goes through here.

Pure functions on arrays; each returns an `Estimate` (point, interval, level, method, n, sided).
Methods and verified test vectors: the project's statistics notes.

Modules: `rates` (Poisson rates, MTBF/MTBSI), `proportions` (Wilson, Clopper–Pearson),
`bootstrap` (cluster/stratified/generic/block), `paired` (sim−real gap, S2R), `agreement`
(MMRV, correlations), `sequential` (early stopping), `planner` (demonstration tests), `mttr`,
`ppi` (prediction-powered success rate from sim + paired real), `comparison` (sequential A/B).
"""

from embodied_eval.stats.agreement import (
    mmrv,
    pearson_agreement,
    policy_agreement_bootstrap,
    spearman_agreement,
)
from embodied_eval.stats.bootstrap import (
    block_bootstrap_mean,
    bootstrap_statistic,
    cluster_bootstrap_mean,
    cluster_weights,
    resample_cluster_rates,
    stratified_bootstrap_mean,
)
from embodied_eval.stats.comparison import (
    SequentialComparison,
    effect_confidence_sequence,
    fixed_n_pairs,
)
from embodied_eval.stats.estimate import Estimate
from embodied_eval.stats.mttr import mttr_interval
from embodied_eval.stats.paired import (
    GapEquivalence,
    McNemarResult,
    difference_of_independent,
    gap_equivalence_test,
    mcnemar_test,
    paired_gap_interval,
    reweight_to_real,
    sim_to_real_agreement,
)
from embodied_eval.stats.planner import (
    FixedDurationPlan,
    HoursPlan,
    TrialsPlan,
    fixed_duration_plan,
    fixed_plan_risks,
    plan_mtbf_gate,
    plan_rate_gate,
    plan_success_gate,
    remaining_hours_for_mtbf,
    remaining_hours_for_rate,
    remaining_trials,
)
from embodied_eval.stats.ppi import (
    PPIResult,
    ppi_mean,
    ppi_mean_clustered,
    ppi_trials_needed,
    ppi_validity,
)
from embodied_eval.stats.proportions import (
    clopper_pearson_interval,
    trials_to_demonstrate_rate,
    wilson_interval,
)
from embodied_eval.stats.rates import (
    hours_to_demonstrate_mtbf,
    hours_to_demonstrate_rate,
    mtbf_interval,
    mtbf_lower_bound,
    poisson_rate_interval,
    poisson_rate_upper,
)
from embodied_eval.stats.sequential import (
    BinomialSPRT,
    MixtureConfidenceSequence,
    MtbfSPRT,
    PoissonRateSequence,
)

__all__ = [
    "BinomialSPRT",
    "Estimate",
    "FixedDurationPlan",
    "GapEquivalence",
    "HoursPlan",
    "McNemarResult",
    "MixtureConfidenceSequence",
    "MtbfSPRT",
    "PPIResult",
    "PoissonRateSequence",
    "SequentialComparison",
    "TrialsPlan",
    "block_bootstrap_mean",
    "bootstrap_statistic",
    "clopper_pearson_interval",
    "cluster_bootstrap_mean",
    "cluster_weights",
    "difference_of_independent",
    "effect_confidence_sequence",
    "fixed_duration_plan",
    "fixed_n_pairs",
    "fixed_plan_risks",
    "gap_equivalence_test",
    "hours_to_demonstrate_mtbf",
    "hours_to_demonstrate_rate",
    "mcnemar_test",
    "mmrv",
    "mtbf_interval",
    "mtbf_lower_bound",
    "mttr_interval",
    "paired_gap_interval",
    "pearson_agreement",
    "plan_mtbf_gate",
    "plan_rate_gate",
    "plan_success_gate",
    "poisson_rate_interval",
    "poisson_rate_upper",
    "policy_agreement_bootstrap",
    "ppi_mean",
    "ppi_mean_clustered",
    "ppi_trials_needed",
    "ppi_validity",
    "remaining_hours_for_mtbf",
    "remaining_hours_for_rate",
    "remaining_trials",
    "resample_cluster_rates",
    "reweight_to_real",
    "sim_to_real_agreement",
    "spearman_agreement",
    "stratified_bootstrap_mean",
    "trials_to_demonstrate_rate",
    "wilson_interval",
]
