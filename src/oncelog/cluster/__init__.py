"""Running a cluster on one machine: a real ZooKeeper (``ZooKeeperProcess``) and, with
``oncelog cluster start``, several brokers around it."""

from .zookeeper_process import (ZooKeeperNotInstalled, ZooKeeperProcess, ZooKeeperStartError,
                                four_letter_word)

__all__ = ["ZooKeeperNotInstalled", "ZooKeeperProcess", "ZooKeeperStartError",
           "four_letter_word"]
