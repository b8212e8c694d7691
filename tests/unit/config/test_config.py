"""Broker and topic configuration: defaults, overrides, Kafka's aliases, files, describing."""

from __future__ import annotations

import pytest

from oncelog.config import (BROKER_CONFIGS, DAY_MS, TOPIC_CONFIGS, BrokerConfig, ConfigError,
                            ConfigSource, ConfigType, describe_broker_configs,
                            describe_topic_configs, read_properties, validate_topic_configs)


def entries_by_name(entries):
    return {entry.name: entry for entry in entries}


# -- defaults and overrides ---------------------------------------------------------------------

def test_defaults():
    config = BrokerConfig()
    assert config["node.id"] == 1
    assert config["listeners"] == "PLAINTEXT://127.0.0.1:9092"
    assert config["num.partitions"] == 1
    assert config["auto.create.topics.enable"] is True
    assert config["unclean.leader.election.enable"] is False
    assert config["message.max.bytes"] == 1048588
    assert config["log.segment.bytes"] == 1 << 30
    assert config["log.retention.ms"] == 7 * DAY_MS
    assert config["log.retention.bytes"] == -1
    assert config["log.cleanup.policy"] == "delete"
    assert config["log.flush.policy"] == "os"
    assert config.explicit == {}
    assert all(config.source(name) == "default" for name in BROKER_CONFIGS)


def test_data_dir_defaults_under_xdg_data_home(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    assert BrokerConfig().data_dir == tmp_path / "oncelog"
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert BrokerConfig().data_dir == tmp_path / ".local/share/oncelog"


def test_log_dirs_wins_and_expands_home(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert BrokerConfig({"log.dirs": "~/data"}).data_dir == tmp_path / "data"


def test_overrides_are_typed_and_marked_static():
    config = BrokerConfig({"num.partitions": " 3 ", "auto.create.topics.enable": "FALSE",
                           "log.cleanup.policy": "compact,delete", "listeners": "h:1"})
    assert config["num.partitions"] == 3
    assert config["auto.create.topics.enable"] is False
    assert config["log.cleanup.policy"] == "compact,delete"
    assert config["listeners"] == "h:1"
    assert config.source("num.partitions") == "static"
    assert config.source("delete.topic.enable") == "default"
    assert config.explicit["num.partitions"] == " 3 "  # kept as given, for DescribeConfigs


@pytest.mark.parametrize("alias, value, name, expected", [
    ("log.retention.hours", "2", "log.retention.ms", 2 * 3_600_000),
    ("log.retention.minutes", "5", "log.retention.ms", 5 * 60_000),
    ("log.roll.hours", "1", "log.roll.ms", 3_600_000),
    ("broker.id", "7", "node.id", 7),
    ("log.dir", "/var/lib/oncelog", "log.dirs", "/var/lib/oncelog"),
])
def test_kafka_aliases_set_the_canonical_config(alias, value, name, expected):
    config = BrokerConfig({alias: value})
    assert config[name] == expected
    assert config.source(name) == "static"
    assert alias not in config.explicit
    assert name in config.explicit


def test_negative_retention_hours_means_keep_forever():
    """Regression: ``log.retention.hours=-1`` (Kafka's spelling of "keep forever") was
    multiplied into -3600000 ms and then refused as below the minimum of -1, so a Kafka
    config file that disables time retention stopped the broker. Kafka reads any negative
    retention as -1; so do we now."""
    assert BrokerConfig({"log.retention.hours": "-1"})["log.retention.ms"] == -1
    assert BrokerConfig({"log.retention.minutes": "-5"})["log.retention.ms"] == -1


def test_non_integer_alias_is_a_config_error():
    """Regression: a non-integer value for an hours/minutes alias (``log.retention.hours=1w``)
    escaped as a bare ValueError, which the CLI does not catch, so the user got a traceback
    instead of a one-line message. It is now a ConfigError naming the alias as written."""
    with pytest.raises(ConfigError, match=r"log\.retention\.hours='1w' is invalid"):
        BrokerConfig({"log.retention.hours": "1w"})


def test_unknown_broker_config_is_ignored_and_named():
    """Kafka warns about configs it does not use and starts anyway, so a stock
    server.properties (num.network.threads, ...) works; the broker logs each ignored name."""
    config = BrokerConfig({"num.network.threads": "3", "num.partitions": "2"})
    assert config.ignored == ["num.network.threads"]
    assert config["num.partitions"] == 2


@pytest.mark.parametrize("name, message", [
    ("log.flush.polcy", r"unknown broker config 'log\.flush\.polcy': neither oncelog's nor "
                        r"Apache Kafka's; did you mean 'log\.flush\.policy'\?"),
    ("replica.lag.time.max", r"did you mean 'replica\.lag\.time\.max\.ms'\?"),
    ("num.netwrk.threads", r"did you mean 'num\.network\.threads'\?"),  # Kafka's, unused
    ("colour", r"unknown broker config 'colour': neither oncelog's nor Apache Kafka's$"),
])
def test_a_name_neither_oncelog_nor_kafka_knows_is_refused_with_the_closest(name, message):
    """Regression: a misspelt setting was logged as ignored and the broker ran on the
    default - log.flush.polcy=ack gave no fsync at all."""
    with pytest.raises(ConfigError, match=message):
        BrokerConfig({name: "ack"})


def test_kafkas_per_listener_and_security_settings_are_ignored_not_refused():
    names = ["listener.name.internal.ssl.cipher.suites", "sasl.kerberos.service.name",
             "zookeeper.ssl.client.enable", "process.roles",
             "remote.log.storage.manager.class.name"]
    assert BrokerConfig({name: "x" for name in names}).ignored == names


def test_a_per_listener_setting_of_oncelogs_is_kept_for_its_listener_and_checked():
    config = BrokerConfig({"listener.name.EXTERNAL.ssl.client.auth": "required",
                           "ssl.keystore.location": "/k.pem"})
    assert config.for_listener("external", "ssl.client.auth") == "required"
    assert config.for_listener("INTERNAL", "ssl.client.auth") == "none"
    assert config.for_listener("EXTERNAL", "ssl.keystore.location") == "/k.pem"
    assert config.ignored == []
    with pytest.raises(ConfigError, match=r"listener\.name\.x\.ssl\.client\.auth='maybe' is "
                       "invalid: expected one of none, requested, required"):
        BrokerConfig({"listener.name.x.ssl.client.auth": "maybe"})


def test_precise_spelling_wins_over_alias():
    config = BrokerConfig({"log.retention.ms": "5000", "log.retention.hours": "1"})
    assert config["log.retention.ms"] == 5000


@pytest.mark.parametrize("name, value, message", [
    ("num.partitions", "three", r"num\.partitions='three' is invalid: expected an integer$"),
    ("auto.create.topics.enable", "yes",
     r"auto\.create\.topics\.enable='yes' is invalid: expected true or false, got 'yes'"),
    ("log.cleanup.policy", "trash",
     r"log\.cleanup\.policy='trash' is invalid: expected one of delete, compact"),
    ("num.partitions", "0", r"num\.partitions='0' is below the minimum 1"),
    ("log.segment.bytes", "1000", r"log\.segment\.bytes='1000' is below the minimum 1024"),
    ("log.retention.ms", "-2", r"log\.retention\.ms='-2' is below the minimum -1"),
    ("broker.id", "-1", r"node\.id='-1' is below the minimum 0"),
])
def test_bad_values_raise_a_readable_config_error(name, value, message):
    with pytest.raises(ConfigError, match=message) as raised:
        BrokerConfig({name: value})
    assert "\n" not in str(raised.value)


def test_config_error_is_a_value_error():
    # Callers that catch ValueError around parsing keep working.
    assert issubclass(ConfigError, ValueError)


# -- properties files ---------------------------------------------------------------------------

def test_read_properties(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text(
        "# a comment\n"
        "! another comment\n"
        "\n"
        "   \n"
        "num.partitions=3\n"
        "  log.retention.hours = 24  \n"
        "auto.create.topics.enable: false\n"
        "listeners=PLAINTEXT://localhost:9093\n"
        "advertised.listeners=\n"
        "num.partitions=4\n")
    values = read_properties(path)
    assert values == {"num.partitions": "4", "log.retention.hours": "24",
                      "auto.create.topics.enable": "false",
                      "listeners": "PLAINTEXT://localhost:9093", "advertised.listeners": ""}
    config = BrokerConfig(values)
    assert (config["num.partitions"], config["log.retention.ms"]) == (4, 24 * 3_600_000)
    assert config["auto.create.topics.enable"] is False


def test_read_properties_reports_the_bad_line(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("# header\nnum.partitions=3\n\njust some words\n")
    with pytest.raises(ConfigError) as raised:
        read_properties(path)
    assert str(raised.value) == f"{path}:4: expected name=value, got 'just some words'"


def test_read_properties_missing_file(tmp_path):
    path = tmp_path / "missing.properties"
    with pytest.raises(ConfigError, match=r"cannot read config file .*missing\.properties"):
        read_properties(path)


# -- topic configs ------------------------------------------------------------------------------

def test_topic_defaults_follow_broker_overrides():
    config = BrokerConfig({"log.retention.ms": "1000", "log.segment.bytes": "2048",
                           "log.cleanup.policy": "compact"})
    defaults = config.topic_defaults()
    assert defaults["retention.ms"] == "1000"
    assert defaults["segment.bytes"] == "2048"
    assert defaults["cleanup.policy"] == "compact"
    assert defaults["retention.bytes"] == "-1"            # not overridden: the default
    assert defaults["max.message.bytes"] == "1048588"     # message.max.bytes's topic name
    assert defaults["file.delete.delay.ms"] == "60000"    # a topic-only config
    assert set(defaults) == set(TOPIC_CONFIGS)


def test_topic_defaults_follow_aliases():
    defaults = BrokerConfig({"log.retention.hours": "3"}).topic_defaults()
    assert defaults["retention.ms"] == str(3 * 3_600_000)


def test_validate_topic_configs():
    configs = {"retention.ms": "60000", "cleanup.policy": "compact", "file.delete.delay.ms": "1"}
    assert validate_topic_configs(configs) == configs
    assert validate_topic_configs(configs) is not configs


def test_kafkas_unused_topic_configs_are_dropped_not_refused():
    configs = {"retention.ms": "60000", "preallocate": "true", "min.cleanable.dirty.ratio": "0.1"}
    assert validate_topic_configs(configs) == {"retention.ms": "60000"}


@pytest.mark.parametrize("configs, message", [
    ({"retention.ms": "1000", "log.retention.ms": "5"},
     r"unknown topic config 'log\.retention\.ms'; did you mean 'retention\.ms'\?"),
    ({"retention.msec": "5"}, r"unknown topic config 'retention\.msec'; did you mean "
                              r"'retention\.ms'\?"),
    ({"retention.ms": "soon"}, r"retention\.ms='soon' is invalid"),
    ({"segment.bytes": "10"}, r"segment\.bytes='10' is below the minimum 1024"),
    ({"message.timestamp.type": "create"}, r"message\.timestamp\.type='create' is invalid"),
])
def test_bad_topic_configs_name_the_topic_config(configs, message):
    with pytest.raises(ConfigError, match=message):
        validate_topic_configs(configs)


# -- describing ---------------------------------------------------------------------------------

def test_describe_topic_configs_sources_and_synonym_order():
    config = BrokerConfig({"log.retention.ms": "5000", "log.segment.bytes": "4096"})
    entries = entries_by_name(describe_topic_configs(
        config, {"retention.ms": "100", "cleanup.policy": "compact"}))
    assert sorted(entries) == sorted(TOPIC_CONFIGS)
    assert list(entries) == sorted(entries)

    retention = entries["retention.ms"]  # topic override over a static broker config
    assert (retention.value, retention.source) == ("100", ConfigSource.TOPIC_CONFIG)
    assert retention.synonyms == (
        ("retention.ms", "100", ConfigSource.TOPIC_CONFIG),
        ("log.retention.ms", "5000", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.retention.ms", str(7 * DAY_MS), ConfigSource.DEFAULT_CONFIG))
    assert retention.config_type == ConfigType.LONG

    segment = entries["segment.bytes"]  # only the broker override
    assert (segment.value, segment.source) == ("4096", ConfigSource.STATIC_BROKER_CONFIG)
    assert segment.synonyms == (
        ("log.segment.bytes", "4096", ConfigSource.STATIC_BROKER_CONFIG),
        ("log.segment.bytes", str(1 << 30), ConfigSource.DEFAULT_CONFIG))

    cleanup = entries["cleanup.policy"]  # only the topic override
    assert (cleanup.value, cleanup.source) == ("compact", ConfigSource.TOPIC_CONFIG)
    assert [s[2] for s in cleanup.synonyms] == [ConfigSource.TOPIC_CONFIG,
                                                ConfigSource.DEFAULT_CONFIG]
    assert cleanup.config_type == ConfigType.LIST  # as Kafka declares it
    assert segment.config_type == ConfigType.INT  # Kafka: INT, though it ends in ".bytes"

    unclean = entries["unclean.leader.election.enable"]  # nothing set
    assert (unclean.value, unclean.source) == ("false", ConfigSource.DEFAULT_CONFIG)
    assert unclean.synonyms == (
        ("unclean.leader.election.enable", "false", ConfigSource.DEFAULT_CONFIG),)
    assert unclean.config_type == ConfigType.BOOLEAN

    assert entries["min.insync.replicas"].config_type == ConfigType.INT
    delay = entries["file.delete.delay.ms"]  # topic-only: no broker synonym
    assert delay.synonyms == (("file.delete.delay.ms", "60000", ConfigSource.DEFAULT_CONFIG),)


def test_describe_broker_configs():
    config = BrokerConfig({"num.partitions": "6", "broker.id": "3"})
    entries = describe_broker_configs(config)
    assert [e.name for e in entries] == sorted(BROKER_CONFIGS)
    by_name = entries_by_name(entries)
    assert (by_name["num.partitions"].value, by_name["num.partitions"].source) == (
        "6", ConfigSource.STATIC_BROKER_CONFIG)
    assert by_name["node.id"].synonyms == (("node.id", "3", ConfigSource.STATIC_BROKER_CONFIG),)
    assert (by_name["delete.topic.enable"].value, by_name["delete.topic.enable"].source) == (
        "true", ConfigSource.DEFAULT_CONFIG)
    assert all(entry.doc for entry in entries)


def test_every_default_parses():
    # A typo in a default would otherwise only show when that config is first read.
    BrokerConfig()
    defaults = {name: d.default for name, d in TOPIC_CONFIGS.items()}
    assert validate_topic_configs(defaults) == defaults
