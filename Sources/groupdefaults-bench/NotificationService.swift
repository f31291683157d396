import Foundation
import GroupDefaults

/// The seed scenario's extension as it runs: `demo-notification-service` started afresh for each
/// push, reading the chosen sound from the group's suite and rewriting the payload. Its whole
/// process time (spawn → exit) is reported next to the store's cold open.
enum NotificationServiceRun {
    static let groupIdentifier = "group.com.example.bench"

    /// The median spawn → exit time of `runs` fresh service processes (after a warm-up one), or
    /// nil when the service's binary is not next to this one (build it with Tools/bench).
    static func measure(in directory: String, runs: Int) throws -> Double? {
        let service = URL(fileURLWithPath: Spawn.executablePath()).deletingLastPathComponent()
            .appendingPathComponent("demo-notification-service").path
        guard FileManager.default.isExecutableFile(atPath: service) else { return nil }

        let root = URL(fileURLWithPath: directory, isDirectory: true)
        let container = try AppGroupContainer(groupIdentifier: groupIdentifier, root: root)
        let defaults = try SharedDefaults(appGroup: container)
        try oneSecondTone().write(to: container.soundsDirectory.appendingPathComponent("ring.wav"))
        defaults.set("ring.wav", forKey: "sound")
        let payload = root.appendingPathComponent("payload.json")
        try Data(#"{"aps":{"alert":{"title":"Ana","body":"Lunch at noon?"},"mutable-content":1}}"#.utf8).write(to: payload)

        var times: [Double] = []
        for round in 0...runs {
            let result = try Spawn.run(service, ["--group", groupIdentifier, "--root", root.path, payload.path], captureOutput: true)
            guard result.status == 0, result.output.contains(#""sound":"ring.wav""#) else {
                throw BenchError("demo-notification-service did not set the sound (status \(result.status)): \(result.output)")
            }
            if round > 0 { times.append(Double(result.wallNanoseconds)) }
        }
        return median(times)
    }

    /// A one-second 8 kHz 16-bit mono WAV of silence.
    private static func oneSecondTone() -> Data {
        let rate: UInt32 = 8000
        let samples = Data(count: Int(rate) * 2)
        var header = Data()
        func append<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.littleEndian) { header.append(contentsOf: $0) } }
        header.append(contentsOf: Array("RIFF".utf8))
        append(UInt32(36 + samples.count))
        header.append(contentsOf: Array("WAVEfmt ".utf8))
        append(UInt32(16))
        append(UInt16(1))
        append(UInt16(1))
        append(rate)
        append(rate * 2)
        append(UInt16(2))
        append(UInt16(16))
        header.append(contentsOf: Array("data".utf8))
        append(UInt32(samples.count))
        return header + samples
    }
}
