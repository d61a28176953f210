"""Idempotent creation of the crawler's Pub/Sub, Bigtable and GCS resources.

The same functions provision the local emulators (``crawler local up``) and a real Google Cloud
project (``crawler provision``): they use the official client libraries, which talk to an emulator
when its variable is set (``PUBSUB_EMULATOR_HOST``, ``BIGTABLE_EMULATOR_HOST``,
``STORAGE_EMULATOR_HOST``) and to Google Cloud otherwise. Every function can be called again:
a resource that already exists is left alone (Bigtable families are reconciled with the schema).
"""

from __future__ import annotations

import datetime
import logging
import os
from collections.abc import Iterable, Mapping

import google.cloud.pubsub_v1 as pubsub_v1
import google.cloud.storage as storage
from google.api_core import exceptions as gexc
from google.cloud.bigtable import Client as BigtableClient
from google.cloud.bigtable import column_family as bt_cf
from google.cloud.bigtable import enums as bt_enums

from transforms.formats import schema

_LOG = logging.getLogger(__name__)

BIGTABLE_EMULATOR_ENV = "BIGTABLE_EMULATOR_HOST"
# How long to wait for a real Bigtable instance to be created (a long-running operation).
_INSTANCE_CREATE_TIMEOUT_S = 600

# The concrete Bigtable GC rules; their base class ``GarbageCollectionRule`` has no ``to_pb``.
GcRule = bt_cf.MaxVersionsGCRule | bt_cf.MaxAgeGCRule | bt_cf.GCRuleUnion | bt_cf.GCRuleIntersection


class ResourceError(RuntimeError):
    """A resource exists in a state the crawler cannot use, or cannot be created."""


def ensure_topic(project: str, topic: str) -> str:
    """Creates the Pub/Sub topic unless it exists.

    Args:
        project: Google Cloud project id.
        topic: Topic id (not the full path).

    Returns:
        The topic path, ``projects/<project>/topics/<topic>``.
    """
    publisher = pubsub_v1.PublisherClient()
    path = publisher.topic_path(project, topic)
    with publisher:
        try:
            publisher.create_topic(name=path)
            _LOG.info("created topic %s", path)
        except gexc.AlreadyExists:
            _LOG.debug("topic %s exists", path)
    return path


def ensure_subscription(
    project: str, topic: str, subscription: str, ack_deadline_seconds: int = 60
) -> str:
    """Creates a pull subscription on ``topic`` unless it exists.

    Args:
        project: Google Cloud project id (of both the topic and the subscription).
        topic: Topic id; it must exist.
        subscription: Subscription id.
        ack_deadline_seconds: Ack deadline of a new subscription, in seconds (10..600).

    Returns:
        The subscription path.

    Raises:
        ResourceError: The subscription exists but is attached to another topic.
    """
    with pubsub_v1.SubscriberClient() as subscriber:
        path = subscriber.subscription_path(project, subscription)
        topic_path = pubsub_v1.PublisherClient.topic_path(project, topic)
        try:
            subscriber.create_subscription(
                request={
                    "name": path,
                    "topic": topic_path,
                    "ack_deadline_seconds": ack_deadline_seconds,
                }
            )
            _LOG.info("created subscription %s on %s", path, topic_path)
        except gexc.AlreadyExists:
            existing = subscriber.get_subscription(subscription=path)
            if existing.topic != topic_path:
                raise ResourceError(
                    f"subscription {path} exists but reads {existing.topic}, not {topic_path}; "
                    "delete it or choose another subscription name"
                ) from None
            _LOG.debug("subscription %s exists", path)
    return path


def gc_rule(family: schema.Family) -> GcRule | None:
    """Returns the Bigtable garbage-collection rule of a schema family.

    Both limits set means a cell goes when either says so (a union), which is how the schema
    reads ("keep at most N versions, none older than D days").

    Args:
        family: A family from ``transforms.formats.schema.TABLE_FAMILIES``.

    Returns:
        The rule, or None when the family keeps everything.
    """
    rules: list[GcRule] = []
    if family.max_versions is not None:
        rules.append(bt_cf.MaxVersionsGCRule(family.max_versions))
    if family.max_age_days is not None:
        rules.append(bt_cf.MaxAgeGCRule(datetime.timedelta(days=family.max_age_days)))
    if not rules:
        return None
    if len(rules) == 1:
        return rules[0]
    return bt_cf.GCRuleUnion(rules=rules)


def ensure_bigtable(
    project: str,
    instance: str,
    tables: Mapping[str, Iterable[schema.Family]] = schema.TABLE_FAMILIES,
    *,
    cluster_zone: str | None = None,
    cluster_nodes: int = 1,
) -> list[str]:
    """Creates the Bigtable tables and column families of the schema, with their GC rules.

    The emulator serves any instance without creating it (it does not implement the instance
    admin API), so the instance is only looked up and created on a real project, where
    ``cluster_zone`` is needed to create it. Existing tables get their missing families added and
    families whose GC rule differs from the schema updated; extra families are left alone.

    Args:
        project: Google Cloud project id.
        instance: Bigtable instance id.
        tables: Table name -> families (default: the crawler's schema).
        cluster_zone: Zone of the cluster of a new instance (real projects only).
        cluster_nodes: Node count of the cluster of a new instance.

    Returns:
        The names of the tables, in the order given.

    Raises:
        ResourceError: The instance does not exist and no ``cluster_zone`` was given.
    """
    client = BigtableClient(project=project, admin=True)
    emulated = bool(os.environ.get(BIGTABLE_EMULATOR_ENV))
    try:
        bt_instance = client.instance(instance, instance_type=bt_enums.Instance.Type.PRODUCTION)
        if not emulated:
            _ensure_instance(bt_instance, cluster_zone, cluster_nodes)
        names = []
        for name, families in tables.items():
            _ensure_table(bt_instance.table(name), tuple(families))
            names.append(name)
        return names
    finally:
        # The Bigtable client has no close(); its admin transports own the gRPC channels.
        client.table_admin_client.transport.close()
        if not emulated:
            client.instance_admin_client.transport.close()


def _ensure_instance(bt_instance, cluster_zone: str | None, cluster_nodes: int) -> None:
    if bt_instance.exists():
        return
    if not cluster_zone:
        raise ResourceError(
            f"Bigtable instance {bt_instance.name} does not exist; pass a cluster zone "
            "(e.g. us-central1-b) to create it"
        )
    cluster = bt_instance.cluster(
        f"{bt_instance.instance_id}-c1",
        location_id=cluster_zone,
        serve_nodes=cluster_nodes,
        default_storage_type=bt_enums.StorageType.SSD,
    )
    operation = bt_instance.create(clusters=[cluster])
    operation.result(timeout=_INSTANCE_CREATE_TIMEOUT_S)
    _LOG.info("created Bigtable instance %s in %s", bt_instance.name, cluster_zone)


def _ensure_table(table, families: tuple[schema.Family, ...]) -> None:
    wanted = {family.name: gc_rule(family) for family in families}
    try:
        table.create(column_families=wanted)
        _LOG.info("created table %s with families %s", table.name, sorted(wanted))
        return
    except gexc.AlreadyExists:
        pass
    existing = table.list_column_families()
    for name, rule in wanted.items():
        if name not in existing:
            try:
                table.column_family(name, rule).create()
                _LOG.info("added family %s to %s", name, table.name)
            except gexc.AlreadyExists:  # created concurrently
                pass
        elif _rule_pb(existing[name].gc_rule) != _rule_pb(rule):
            table.column_family(name, rule).update()
            _LOG.info("updated the GC rule of %s:%s", table.name, name)


def _rule_pb(rule: GcRule | None):
    """Comparable form of a GC rule (None and an empty rule both mean keep everything)."""
    return None if rule is None else rule.to_pb()


def ensure_bucket(project: str, bucket: str, location: str | None = None) -> str:
    """Creates the GCS bucket unless it exists.

    Args:
        project: Google Cloud project id that owns a new bucket.
        bucket: Bucket name.
        location: Location of a new bucket (default: the service's default, ``US``).

    Returns:
        The bucket URL, ``gs://<bucket>``.

    Raises:
        ResourceError: The name is taken by a bucket this project cannot use.
    """
    client = storage.Client(project=project)
    try:
        try:
            if client.lookup_bucket(bucket) is not None:
                _LOG.debug("bucket %s exists", bucket)
                return f"gs://{bucket}"
        except gexc.Forbidden as e:
            raise ResourceError(f"bucket {bucket} exists but is not accessible: {e}") from e
        try:
            client.create_bucket(bucket, project=project, location=location)
            _LOG.info("created bucket gs://%s", bucket)
        except gexc.Conflict:  # created concurrently
            _LOG.debug("bucket %s exists", bucket)
        return f"gs://{bucket}"
    finally:
        client.close()


def ensure_all(project: str, instance: str, topic: str, subscription: str, bucket: str, *,
               cluster_zone: str | None = None, cluster_nodes: int = 1,
               location: str | None = None,
               notifications_topic: str = schema.DEFAULT_NOTIFICATIONS_TOPIC) -> list[str]:
    """Creates every resource the crawler needs (see the ``ensure_*`` functions); idempotent.

    Shared by ``crawler local up`` (against the emulators) and ``crawler provision`` (a real
    project).

    Args:
        project: Google Cloud project id.
        instance: Bigtable instance id.
        topic: Frontier topic id.
        subscription: The crawler's subscription id on the frontier topic.
        bucket: Bucket for WARC files and exports.
        cluster_zone: Zone of a new Bigtable instance's cluster (a real project needs one).
        cluster_nodes: Nodes of a new Bigtable cluster.
        location: Location of a new bucket.
        notifications_topic: Topic id of the batch notifications.

    Returns:
        What now exists, one line per resource.
    """
    done = [f"topic         {ensure_topic(project, topic)}",
            f"subscription  {ensure_subscription(project, topic, subscription)}",
            f"topic         {ensure_topic(project, notifications_topic)}"]
    tables = ensure_bigtable(project, instance, cluster_zone=cluster_zone,
                             cluster_nodes=cluster_nodes)
    done.append(f"bigtable      projects/{project}/instances/{instance}: {', '.join(tables)}")
    done.append(f"bucket        {ensure_bucket(project, bucket, location)}")
    return done
