"""The pipeline's step labels, pinned: Dataflow's ``--update`` matches the steps of a running job
by label, so renaming one (a composite's label, a DoFn class name Beam puts into a ParDo's
label) makes the update fail. Change this list only when a change of the graph is meant, and
say so in the release notes.

Changed on purpose (client batches, issue 14): new steps ``Crawl/TakeInBatches``,
``Crawl/AllDeadLetters``, ``Crawl/DecidedBatchUrls``, ``WakeRunningBatches``,
``AllBatchEvents``, ``TrackBatches``; ``*/MutateRows`` now has a second output (batch events),
so its ParDo is the nested ``*/MutateRows/ParDo(_WriteRowsFn)``. A running job from before it
is replaced (drain, then launch), not ``--update``d.

Changed on purpose (analysts, issue 15): new steps ``Crawl/DetectDuplicates`` (exact duplicates
keyed by content digest, between extraction and the loop), ``FindNearDuplicates`` with its
rows (``NearDuplicateRows``, ``WriteNearDuplicates``), and the exports (``AllExported``,
``ExportRows``, ``WriteExports``). Jobs from before are replaced, not updated."""

from __future__ import annotations

from typing import Any

import apache_beam as beam
from apache_beam.pipeline import PipelineVisitor

from pipeline.graph import build_pipeline
from pipeline.options import CrawlerOptions

STEP_LABELS = [
    "ReadFrontier",
    "ReadFrontier/Read",
    "ReadFrontier/ParDo(_AddMetricsPassThrough)",
    "ReadFrontier/Map(_from_proto_str)",
    "Crawl",
    "Crawl/ReadCrawlRequests",
    "Crawl/ReadCrawlRequests/DecodeCanonicalizeKey",
    "Crawl/ReadCrawlRequests/DecodeCanonicalizeKey/ParDo(_DecodeAndKeyFn)",
    "Crawl/WakePendingKeys",
    "Crawl/WakePendingKeys/Start",
    "Crawl/WakePendingKeys/PendingKeys",
    "Crawl/TakeInBatches",
    "Crawl/TakeInBatches/RecordBatches",
    "Crawl/TakeInBatches/RecordBatches/ParDo(_IntakeFn)",
    "Crawl/FrontierInput",
    "Crawl/HostFrontier",
    "Crawl/HostFrontier/ScheduleAndFetch",
    "Crawl/HostFrontier/ScheduleAndFetch/ParDo(_HostFrontierFn)",
    "Crawl/ExtractLinks",
    "Crawl/ExtractLinks/ParseHtml",
    "Crawl/DetectDuplicates",
    "Crawl/DetectDuplicates/SplitPages",
    "Crawl/DetectDuplicates/SplitPages/ParDo(ApplyPartitionFnFn)",
    "Crawl/DetectDuplicates/SplitPages/ParDo(ApplyPartitionFnFn)/ParDo(ApplyPartitionFnFn)",
    "Crawl/DetectDuplicates/KeyByContent",
    "Crawl/DetectDuplicates/JudgeContent",
    "Crawl/DetectDuplicates/AllDiscovered",
    "Crawl/OtherKeysSitemaps",
    "Crawl/AllDiscoveredRequests",
    "Crawl/PublishLinks",
    "Crawl/PublishLinks/PublishThenRelease",
    "Crawl/PublishLinks/PublishThenRelease/ParDo(_PublishThenReleaseFn)",
    "Crawl/WriteWarc",
    "Crawl/WriteWarc/AssignShard",
    "Crawl/WriteWarc/RollFiles",
    "Crawl/RecordedMessages",
    "Crawl/AllDeadLetters",
    "Crawl/DecidedBatchUrls",
    "PageRows",
    "FetchRows",
    "AllWebtableRows",
    "WriteWebtable",
    "WriteWebtable/MutateRows",
    "WriteWebtable/MutateRows/ParDo(_WriteRowsFn)",
    "WakeRunningBatches",
    "WakeRunningBatches/Start",
    "WakeRunningBatches/RunningBatches",
    "AllBatchEvents",
    "TrackBatches",
    "TrackBatches/CountAndAnnounce",
    "FindNearDuplicates",
    "FindNearDuplicates/ProbeBands",
    "FindNearDuplicates/JudgeBands",
    "NearDuplicateRows",
    "WriteNearDuplicates",
    "WriteNearDuplicates/MutateRows",
    "WriteNearDuplicates/MutateRows/ParDo(_WriteRowsFn)",
    "AllExported",
    "ExportRows",
    "WriteExports",
    "WriteExports/AssignShard",
    "WriteExports/RollFiles",
    "HostRows",
    "WriteHosts",
    "WriteHosts/MutateRows",
    "WriteHosts/MutateRows/ParDo(_WriteRowsFn)",
    "DeadLetterRows",
    "WriteDeadLetters",
    "WriteDeadLetters/MutateRows",
    "WriteDeadLetters/MutateRows/ParDo(_WriteRowsFn)",
    "AllRecordedMessages",
    "Acknowledge",
    "Acknowledge/AckWholeMessages",
    "Acknowledge/AckWholeMessages/ParDo(_AckWholeMessagesFn)",
    "Acknowledge/KeyByAckId",
    "Acknowledge/CollectParts",
]


def _labels(p: beam.Pipeline) -> list[str]:
    found: list[str] = []

    class Visitor(PipelineVisitor):
        def enter_composite_transform(self, node: Any) -> None:
            if node.full_label:
                found.append(node.full_label)

        def visit_transform(self, node: Any) -> None:
            found.append(node.full_label)

    p.visit(Visitor())
    return found


def test_the_production_graph_keeps_its_step_labels():
    options = CrawlerOptions([
        "--project=my-project", "--input_subscription=projects/my-project/subscriptions/sub",
        "--frontier_topic=projects/my-project/topics/frontier", "--warc_prefix=gs://b/warc",
        "--streaming"])
    p = beam.Pipeline(options=options)
    build_pipeline(p, options)
    assert _labels(p) == STEP_LABELS
