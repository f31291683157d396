import GroupDefaultsWire
package import Logging

/// A log handler that writes what `base` writes with its message and every metadata value through
/// `printable`: a suite, account, device name or key a log line names can neither forge another
/// line of the log nor reach the operator's terminal as an escape sequence. The tools' logs go to
/// stderr through it.
package struct PrintableLogHandler: LogHandler {
    private var base: any LogHandler

    /// Wraps `base`, which is given no metadata provider: this handler asks its own and escapes
    /// what it answers.
    package init(_ base: any LogHandler) {
        self.base = base
        self.base.metadataProvider = nil
        self.base.metadata = base.metadata.mapValues(Self.printable)
    }

    /// `StreamLogHandler.standardError(label:)` at `level`, escaped.
    package static func standardError(label: String, level: Logger.Level) -> PrintableLogHandler {
        var handler = StreamLogHandler.standardError(label: label)
        handler.logLevel = level
        return PrintableLogHandler(handler)
    }

    package var metadataProvider: Logger.MetadataProvider?

    package var logLevel: Logger.Level {
        get { base.logLevel }
        set { base.logLevel = newValue }
    }

    package var metadata: Logger.Metadata {
        get { base.metadata }
        set { base.metadata = newValue.mapValues(Self.printable) }
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { base[metadataKey: key] }
        set { base[metadataKey: key] = newValue.map(Self.printable) }
    }

    package func log(event: LogEvent) {
        var event = event
        var metadata = metadataProvider?.get() ?? [:]
        metadata.merge(event.metadata ?? [:]) { $1 }
        event.metadata = metadata.isEmpty ? nil : metadata.mapValues(Self.printable)
        event.message = "\(GroupDefaultsWire.printable(event.message.description))"
        base.log(event: event)
    }

    /// A metadata value with every string in it through `printable`.
    static func printable(_ value: Logger.Metadata.Value) -> Logger.Metadata.Value {
        switch value {
        case .string(let text): .string(GroupDefaultsWire.printable(text))
        case .stringConvertible(let item): .string(GroupDefaultsWire.printable(item.description))
        case .array(let items): .array(items.map(printable))
        case .dictionary(let items): .dictionary(items.mapValues(printable))
        }
    }
}
