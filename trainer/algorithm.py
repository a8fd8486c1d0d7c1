"""The run's RL algorithm in one table: how rewards become advantages and how the loss weighs them.

    [algorithm]
    advantage = "grpo"        # group estimator (trainer/credit.py ADVANTAGES)
    credit = "outcome"        # per-turn estimator (CREDITS): outcome | turn
    discount = 1.0            # of later turns' rewards in per-turn returns (turn credit)
    loss = "grpo"             # policy loss (trainer/losses.py LOSSES)
    aggregation = "token-mean"  # how the loss averages (trainer/aggregation.py); unset: the loss's own
    domain_scale = "none"     # none | running: scale each domain's advantages by its running
                              # statistics, so its size or reward scale does not set its weight
    domain_momentum = 0.9     # EMA weight of the last running statistics (domain_scale.py)

The rollout (NormalizeRewards) and the trainer read the same object, so the advantages written
and the advantages trained on cannot disagree about credit.
"""
from dataclasses import asdict, dataclass

from flywheel.trainer.aggregation import AGGREGATIONS, aggregation_unit
from flywheel.trainer.credit import ADVANTAGES, CREDITS
from flywheel.trainer.losses import LOSSES, default_aggregation

DOMAIN_SCALES = ("none", "running")


@dataclass(frozen=True)
class Algorithm:
    advantage: str = "grpo"
    credit: str = "outcome"
    discount: float = 1.0
    loss: str = "grpo"
    aggregation: str | None = None    # None: the loss's own (its paper's)
    domain_scale: str = "none"        # DOMAIN_SCALES; none: the advantages as credit set them
    domain_momentum: float = 0.9      # running: the momentum of each domain's statistics, in [0, 1)

    def check(self) -> "Algorithm":
        """Self, once every name is one its registry holds (KeyError naming the known ones) and
        the domain scaling is a known one with a momentum in [0, 1) (ValueError)."""
        ADVANTAGES.get(self.advantage)
        CREDITS.get(self.credit)
        LOSSES.get(self.loss)
        AGGREGATIONS.get(self.loss_aggregation())
        if self.domain_scale not in DOMAIN_SCALES:
            raise ValueError(f"unknown domain_scale {self.domain_scale!r}: known ones are "
                             f"{', '.join(DOMAIN_SCALES)}")
        if not 0 <= self.domain_momentum < 1:
            raise ValueError(f"domain_momentum must be in [0, 1), got {self.domain_momentum}")
        return self

    def loss_aggregation(self) -> str:
        """The aggregation the loss uses: the one chosen, else the loss's default."""
        return self.aggregation or default_aggregation(self.loss)

    def loss_unit(self) -> str:
        """What the loss averages over ("token" or "sequence"), for microbatch weights."""
        return aggregation_unit(self.loss_aggregation())

    def to_dict(self) -> dict:
        return asdict(self)
