import Foundation

/// The results of one run, printed as a table or as JSON.
struct Report: Encodable {
    let lmdbFlags: String
    let mapSize: Int
    let keys: Int
    let method: [String]
    let rows: [Row]
    /// The change-notification measurements (`--only notify`), when they ran.
    var notifications: Notifications.Summary? = nil

    struct Row: Encodable {
        let operation: String
        let label: String
        let groupDefaultsNs: Double
        /// Nil where raw LMDB or UserDefaults has nothing to measure (the notification rows); their
        /// cells then show `rawLMDBReference` / `userDefaultsReference` instead.
        let rawLMDBNs: Double?
        let groupDefaultsToRaw: Double?
        let userDefaultsNs: Double?
        let groupDefaultsToUserDefaults: Double?
        let rawLMDBReference: String?
        let userDefaultsReference: String?
        let userDefaultsOperation: String
        let target: String?
        let targetMet: Bool?

        init(_ operation: Operation, groupDefaults: Double, rawLMDB: Double, userDefaults: Double) {
            self.init(
                operation: operation.rawValue,
                label: operation.label,
                groupDefaults: groupDefaults,
                rawLMDB: rawLMDB,
                userDefaults: userDefaults,
                userDefaultsOperation: operation.userDefaultsCall,
                target: operation.target.text,
                targetMet: operation.target.isMet(groupDefaults: groupDefaults, raw: rawLMDB)
            )
        }

        /// An extra line with no target: a whole child process, spawn to exit.
        init(wholeProcess label: String, groupDefaults: Double, rawLMDB: Double, userDefaults: Double) {
            self.init(
                operation: "cold-start-process",
                label: label,
                groupDefaults: groupDefaults,
                rawLMDB: rawLMDB,
                userDefaults: userDefaults,
                userDefaultsOperation: "spawn → exit",
                target: nil,
                targetMet: nil
            )
        }

        /// An extra line measured for GroupDefaults only, with no reference and no target.
        init(only operation: String, label: String, groupDefaults: Double, note: String) {
            self.init(
                operation: operation,
                label: label,
                groupDefaults: groupDefaults,
                rawLMDB: nil,
                userDefaults: nil,
                rawLMDBReference: "—",
                userDefaultsReference: "—",
                userDefaultsOperation: note,
                target: nil,
                targetMet: nil
            )
        }

        /// A line beside a raw LMDB figure, with no UserDefaults counterpart.
        init(measured operation: String, label: String, groupDefaults: Double, rawLMDB: Double, note: String, target: Target?) {
            self.init(
                operation: operation,
                label: label,
                groupDefaults: groupDefaults,
                rawLMDB: rawLMDB,
                userDefaults: nil,
                userDefaultsReference: "—",
                userDefaultsOperation: note,
                target: target?.text,
                targetMet: target?.isMet(groupDefaults: groupDefaults, raw: rawLMDB)
            )
        }

        /// A change-notification line: GroupDefaults only, with reference text (or "—") in the
        /// other columns.
        init(
            notify operation: String,
            label: String,
            groupDefaults: Double,
            rawLMDB: String?,
            userDefaults: String?,
            target: Target?
        ) {
            self.init(
                operation: operation,
                label: label,
                groupDefaults: groupDefaults,
                rawLMDB: nil,
                userDefaults: nil,
                rawLMDBReference: rawLMDB,
                userDefaultsReference: userDefaults,
                userDefaultsOperation: Operation.notify.userDefaultsCall,
                target: target?.text,
                targetMet: target?.isMet(groupDefaults: groupDefaults, raw: .nan)
            )
        }

        private init(
            operation: String,
            label: String,
            groupDefaults: Double,
            rawLMDB: Double?,
            userDefaults: Double?,
            rawLMDBReference: String? = nil,
            userDefaultsReference: String? = nil,
            userDefaultsOperation: String,
            target: String?,
            targetMet: Bool?
        ) {
            self.operation = operation
            self.label = label
            groupDefaultsNs = Format.rounded(groupDefaults)
            rawLMDBNs = rawLMDB.map { Format.rounded($0) }
            groupDefaultsToRaw = rawLMDB.map { Format.rounded(groupDefaults / $0, places: 3) }
            userDefaultsNs = userDefaults.map { Format.rounded($0) }
            groupDefaultsToUserDefaults = userDefaults.map { Format.rounded(groupDefaults / $0, places: 6) }
            self.rawLMDBReference = rawLMDBReference
            self.userDefaultsReference = userDefaultsReference
            self.userDefaultsOperation = userDefaultsOperation
            self.target = target
            self.targetMet = targetMet
        }
    }

    func json() throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(self), as: UTF8.self)
    }

    func table() -> String {
        let header = ["operation", "GroupDefaults", "raw LMDB", "GD/raw", "UserDefaults", "GD/UD", "target", "met"]
        let body = rows.map { row in
            [
                row.label, Format.duration(row.groupDefaultsNs),
                row.rawLMDBNs.map(Format.duration) ?? row.rawLMDBReference ?? "—",
                row.groupDefaultsToRaw.map(Format.ratio) ?? "—",
                row.userDefaultsNs.map(Format.duration) ?? row.userDefaultsReference ?? "—",
                row.groupDefaultsToUserDefaults.map(Format.ratio) ?? "—",
                row.target ?? (row.operation == "cold-start-process" ? "(spawn → exit)" : ""),
                row.targetMet.map { $0 ? "yes" : "NO" } ?? "",
            ]
        }
        let lines = Format.columns([header] + body, leftAligned: [0, 6, 7])
        return """
            GroupDefaults vs raw LMDB (C, same flags: \(lmdbFlags), map \(mapSize / 1_048_576) MiB) \
            vs Foundation UserDefaults(suiteName:)
            \(keys) keys, string values ~60 bytes; \(method.joined(separator: ";\n"))

            \(lines.joined(separator: "\n"))

            UserDefaults: a set is set(_:forKey:) + synchronize() (only then does another process see it);
            update = integer(forKey:) + set + synchronize(); write 100 keys = 100 sets + one synchronize().
            """ + (notifications.map { "\n" + Notifications.notes($0) } ?? "")
    }
}

enum Format {
    /// The rows as lines of padded columns, two spaces apart: numbers right-aligned, the columns
    /// in `leftAligned` left-aligned.
    static func columns(_ rows: [[String]], leftAligned: Set<Int>) -> [String] {
        guard let first = rows.first else { return [] }
        let widths = first.indices.map { column in rows.map { $0[column].count }.max()! }
        return rows.map { cells in
            cells.indices.map { column in
                let padding = String(repeating: " ", count: widths[column] - cells[column].count)
                return leftAligned.contains(column) ? cells[column] + padding : padding + cells[column]
            }.joined(separator: "  ").replacingOccurrences(of: " +$", with: "", options: .regularExpression)
        }
    }

    static func duration(_ nanoseconds: Double) -> String {
        switch nanoseconds {
        case ..<1_000: String(format: "%.0f ns", nanoseconds)
        case ..<1_000_000: significant(nanoseconds / 1_000) + " µs"
        case ..<1_000_000_000: significant(nanoseconds / 1_000_000) + " ms"
        default: significant(nanoseconds / 1_000_000_000) + " s"
        }
    }

    /// Two decimals, more below 0.1 so that two significant digits show: "1.07×", "0.00023×".
    static func ratio(_ value: Double) -> String {
        let decimals = value > 0 && value < 0.1 ? Int((-log10(value)).rounded(.down)) + 2 : 2
        return String(format: "%.\(decimals)f×", value)
    }

    /// "2", "1.5": no trailing zeros.
    static func number(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }

    static func rounded(_ value: Double, places: Int = 1) -> Double {
        let scale = pow(10, Double(places))
        return (value * scale).rounded() / scale
    }

    /// Three significant digits for values from 1 to 999.
    private static func significant(_ value: Double) -> String {
        String(format: value < 10 ? "%.2f" : value < 100 ? "%.1f" : "%.0f", value)
    }
}
