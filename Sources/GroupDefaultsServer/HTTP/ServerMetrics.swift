import Foundation
import Metrics
import Prometheus

/// The server's metrics, in Prometheus' text format at `GET /metrics`: requests by route and status
/// with their latency histogram (Hummingbird's `MetricsMiddleware`), push ops by outcome, and the
/// open event streams. swift-metrics' process-wide system is bootstrapped once with swift-prometheus'
/// factory; every server of the process (tests run several) reports into its registry.
enum ServerMetrics {
    /// The registry `/metrics` emits.
    static let registry: PrometheusCollectorRegistry = {
        let registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10),
            .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
            .seconds(1), .seconds(5), .seconds(30), .seconds(60),
        ]
        MetricsSystem.bootstrap(factory)
        return registry
    }()

    /// Makes sure the system is bootstrapped before the first metric is made, and the gauge of open
    /// streams is exposed from the start.
    static func bootstrap() {
        _ = registry
        _ = openEventStreams
    }

    static func pushed(applied: Int, superseded: Int) {
        if applied > 0 { Counter(label: "groupdefaults_push_ops_total", dimensions: [("status", "applied")]).increment(by: applied) }
        if superseded > 0 {
            Counter(label: "groupdefaults_push_ops_total", dimensions: [("status", "superseded")]).increment(by: superseded)
        }
    }

    static let openEventStreams = Meter(label: "groupdefaults_event_streams_open")

    /// The exposition text.
    static func text() -> [UInt8] {
        bootstrap()
        return registry.emitToBuffer()
    }
}
