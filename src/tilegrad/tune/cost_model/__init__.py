"""Cost models: the protocol and its registry (`model.py`), Ansor's ranking trees (`trees.py`), AutoTVM's XGBoost
ranking trees (`xgb.py`) and Felix's differentiable MLP with its shipped pretrained weights (`mlp.py`, `pretrained/`).

The implementations register here by name and are imported only when a tuner makes one: LightGBM, XGBoost and
PyTorch load on first use.
"""

from ...extras import require
from .model import COST_MODELS as COST_MODELS
from .model import CostModel as CostModel
from .model import make_cost_model as make_cost_model
from .model import register_cost_model as register_cost_model
from .model import throughput_of as throughput_of


def _trees() -> CostModel:
    require("lightgbm", "tune", "the LightGBM cost model (Ansor's evolutionary search)")
    from ..features.extract import aggregate_part
    from .trees import TreeCostModel

    # Ansor's trees read the sums and maxes over stores: the store slots rank a point better but fit 5 to 7 times
    # slower, at every round of a search (docs/tuning.md)
    return TreeCostModel(read=aggregate_part)


def _xgb_rank() -> CostModel:
    require("xgboost", "tune", "the XGBoost cost model (the autotvm policy)")
    from .xgb import XGBRankModel

    return XGBRankModel()


def _pretrained_mlp() -> CostModel:
    require("torch", "tune", "the MLP cost model (Felix's gradient search, the default policy)")
    from .mlp import MLPCostModel

    return MLPCostModel.pretrained()


register_cost_model("trees", _trees)
register_cost_model("mlp", _pretrained_mlp)
register_cost_model("xgb-rank", _xgb_rank)
