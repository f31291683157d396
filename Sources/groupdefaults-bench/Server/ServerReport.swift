import Foundation

/// The results of `groupdefaults-bench server`, printed as a table or as JSON.
struct ServerReport: Encodable {
    var method: [String]
    var rows: [Row] = []

    struct Row: Encodable {
        var backend: String
        var measurement: String
        /// Ops per second, or KiB per stream; nil for the latency rows (see p50/p99).
        var value: Double?
        var unit: String?
        var samples: Int?
        var p50Ms: Double?
        var p99Ms: Double?
        var reference: String?
        /// value / the reference's rate.
        var ratio: Double?
        var target: String?
        var met: Bool?
        /// Cores busy on average, and the disk's work, while this was measured.
        var usage: Usage?
        /// What the figure is made of, where the columns cannot say (RSS before and after).
        var detail: String?
    }

    /// A rate that a figure is set beside: measured before and after the figures it serves (the
    /// disk's speed drifts on this virtual machine), the mean of the two.
    struct Reference {
        var label: String
        var before: Double
        var after: Double
        /// Writes the data disk completed per operation of the reference, where that tells something.
        var diskWritesPerOp: Double? = nil

        var perSecond: Double { (before + after) / 2 }
        var text: String { "\(label) \(ServerFormat.count(perSecond))/s (\(ServerFormat.count(before)) → \(ServerFormat.count(after)))" }
    }

    func json() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(self), as: UTF8.self)
    }

    /// The header and one line of cells per row.
    private func cells() -> [[String]] {
        let header = [
            "backend", "measurement", "figure", "p50", "p99", "same-run reference", "ratio", "target", "met",
            "cores: server/bench/pg/other", "disk: writes/s, flushes/s, ms per write",
        ]
        return [header]
            + rows.map { row -> [String] in
                let figure =
                    row.value.map { value in
                        switch row.unit {
                        case "ops/s": "\(ServerFormat.count(value)) ops/s"
                        case "ms": ServerFormat.milliseconds(value)
                        case "requests": "\(Int(value)) requests"
                        case "KiB", nil: String(format: "%.1f KiB", value)
                        case let unit?: "\(ServerFormat.count(value)) \(unit)"
                        }
                    } ?? row.samples.map { "\($0) samples" } ?? ""
                return [
                    row.backend, row.measurement, figure,
                    row.p50Ms.map(ServerFormat.milliseconds) ?? "", row.p99Ms.map(ServerFormat.milliseconds) ?? "",
                    row.reference ?? "", row.ratio.map(Format.ratio) ?? "", row.target ?? "",
                    row.met.map { $0 ? "yes" : "NO" } ?? "", row.usage.map(ServerFormat.cores) ?? "",
                    row.usage?.disk.map(ServerFormat.disk) ?? "",
                ]
            }
    }

    /// The table as Markdown, for docs/reference/performance.md.
    func markdown() -> String {
        let all = cells()
        let alignments = all[0].indices.map { [2, 3, 4, 6].contains($0) ? "---:" : "---" }
        return ([all[0], alignments] + all.dropFirst()).map { "| " + $0.joined(separator: " | ") + " |" }.joined(separator: "\n")
    }

    func table() -> String {
        let lines = Format.columns(cells(), leftAligned: [0, 1, 5, 7, 8, 9, 10])
        let details = rows.compactMap { row in row.detail.map { "\(row.backend), \(row.measurement): \($0)" } }
        let busiest = rows.compactMap { $0.usage?.other }.max() ?? 0
        let disturbed =
            busiest > 0.2
            ? [
                "",
                String(
                    format: "NOTE: other processes kept up to %.2f cores busy during these measurements (column 'other'): "
                        + "figures taken then are disturbed; run again on a quiet machine.",
                    busiest
                ),
            ]
            : []
        return (method + [""] + lines + (details.isEmpty ? [] : [""] + details) + disturbed).joined(separator: "\n")
    }
}

enum ServerFormat {
    /// "5,210", "412", "0.93".
    static func count(_ value: Double) -> String {
        guard value >= 100 else { return String(format: value >= 10 ? "%.1f" : "%.2f", value) }
        let digits = String(Int(value.rounded()))
        var grouped = ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { grouped += "," }
            grouped.append(digit)
        }
        return grouped
    }

    static func milliseconds(_ value: Double) -> String {
        String(format: value < 10 ? "%.2f ms" : value < 100 ? "%.1f ms" : "%.0f ms", value)
    }

    static func cores(_ use: Usage) -> String {
        ([use.server, use.bench] + (use.postgres.map { [$0] } ?? []) + [use.other]).map { String(format: "%.2f", $0) }
            .joined(separator: "/")
    }

    static func disk(_ disk: Usage.Disk) -> String {
        String(format: "%.0f, %.0f, %.2f", disk.writesPerSecond, disk.flushesPerSecond, disk.millisecondsPerWrite)
    }
}
