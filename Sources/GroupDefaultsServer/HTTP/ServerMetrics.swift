import Foundation
import GroupDefaultsWire
import Metrics
package import Prometheus

/// The server's metrics, in Prometheus' text format at `GET /metrics`: requests by route and status
/// with their latency histogram (Hummingbird's `MetricsMiddleware`), push ops by outcome, and the
/// open event streams (and of them, those held by their connection). They are reported through
/// swift-metrics; the program bootstraps its process-wide system once with `makeFactory()`, whose
/// metrics `/metrics` emits (every server of the process reports into the one registry).
package enum ServerMetrics {
    /// The registry `/metrics` emits.
    static let registry = PrometheusCollectorRegistry()

    /// swift-prometheus' factory over the registry `/metrics` emits, with latency buckets from
    /// 0.5 ms to 60 s: what the program bootstraps `MetricsSystem` with.
    package static func makeFactory() -> PrometheusMetricsFactory {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10),
            .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
            .seconds(1), .seconds(5), .seconds(30), .seconds(60),
        ]
        return factory
    }

    static func pushed(_ results: [PushResult]) {
        for status in [PushResult.Status.applied, .superseded, .refused] {
            let count = results.count { $0.status == status }
            if count > 0 { Counter(label: "groupdefaults_push_ops_total", dimensions: [("status", status.rawValue)]).increment(by: count) }
        }
    }

    /// The gauge of open event streams (made at each use: it reports to the system bootstrapped by then).
    static var openEventStreams: Meter { Meter(label: "groupdefaults_event_streams_open") }

    /// The gauge of the open event streams that their connection holds with no task
    /// (`ParkedEventStream`), a part of `openEventStreams`: the rest run in a task each, at about
    /// twice the memory.
    static var heldEventStreams: Meter { Meter(label: "groupdefaults_event_streams_held") }

    /// The exposition text.
    static func text() -> [UInt8] { registry.emitToBuffer() }
}
