"""The keys of the messages between the ServerApp and the ClientApps, in one place.

A train message carries ``arrays`` (the global model) and ``config`` (the scenario as TOML
text, the round, the training seed); a reply carries ``arrays`` (the local model),
``metrics`` and, with client-side GNQ, ``audit`` (per-sample scores with their sample ids
and local epochs).  ``arrays`` / ``config`` / ``server-round`` are the names Flower's own
strategies use.
"""

# records
ARRAYS = "arrays"
CONFIG = "config"
METRICS = "metrics"
AUDIT = "audit"

# config (server -> client)
SCENARIO = "scenario"
SERVER_ROUND = "server-round"
TRAIN_SEED = "train-seed"
#: a reference federation's client (the auditor's LiRA / RMIA references): the sample ids it
#: trains on and its client index (instead of the node's own partition)
REFERENCE_IDS = "reference-ids"
REFERENCE_CLIENT = "reference-client"

# metrics (client -> server)
PARTITION_ID = "partition-id"  # also the node_config key a SuperNode is started with
NUM_EXAMPLES = "num-examples"
TRAIN_LOSS = "train-loss"
DP_STEPS = "dp-steps"
DP_SAMPLE_RATE = "dp-sample-rate"
#: every client sends 1 under a defense with uniform weights; FedAvg weighs by it
UNIT_WEIGHT = "dp-weight"

# audit (client -> server): the client-side GNQ's scores, read by the client-gnq probe
from fedaudit.probes.client_gnq import EPOCHS as GNQ_EPOCHS  # noqa: E402
from fedaudit.probes.client_gnq import IDS as GNQ_IDS  # noqa: E402
from fedaudit.probes.client_gnq import SCORES as GNQ_SCORES  # noqa: E402
