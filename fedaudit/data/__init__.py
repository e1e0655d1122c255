"""Datasets, splits and federated partitions."""

from fedaudit.data.datasets import DATASETS, Dataset, load_dataset, register_dataset
from fedaudit.data.federated import (FederatedData, build_federated_data, inject_canaries,
                                     partition_data, partition_ids, split_ids)

__all__ = ["DATASETS", "Dataset", "FederatedData", "build_federated_data", "inject_canaries",
           "load_dataset", "partition_data", "partition_ids", "register_dataset", "split_ids"]
