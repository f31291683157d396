import ArgumentParser
import CommandLineSupport
import Foundation
import GroupDefaults
import Synchronization

/// The notification-service extension of the seed scenario, as a process: reads an APNs payload,
/// puts the sound the user chose (in the host app) into `aps.sound`, and prints the payload to
/// deliver. On any failure, or when the deadline passes, it delivers the original payload
/// unchanged, byte for byte, and says why on stderr: a best attempt, never an empty notification.
@main
struct NotificationService: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo-notification-service",
        abstract: "The seed scenario's notification service: put the chosen sound into an APNs payload.",
        discussion: """
            Reads the payload (JSON) from PAYLOAD_FILE, else stdin, and prints the payload to deliver. \
            If aps.mutable-content is 1 and the group's `sound` names a valid sound in Library/Sounds, \
            aps.sound is set to it; otherwise, and after --deadline seconds, the payload is delivered \
            unchanged and stderr says why. Exits 0 whenever a payload was delivered.
            """
    )

    @Option(name: .long, help: "The app group identifier, e.g. group.com.example.chat.") var group: String
    @Option(name: .long, help: "The directory holding group containers (default: the suites' default directory).")
    var root: String?
    @Option(name: .long, help: "Seconds allowed before the payload is delivered unchanged.") var deadline: Double = 1
    @Argument(help: "The payload file (default: stdin).") var payloadFile: String?

    static func main() {
        main(reportingAs: tool, helpHint: "see demo-notification-service --help")
    }

    /// How the service reports a failure: one line on stderr, exit status 1.
    static let tool = CommandLineTool(name: "demo-notification-service") { error in
        (error as? SharedDefaultsError).map { CommandFailure($0.description) }
    }

    func validate() throws {
        guard deadline.isFinite, deadline >= 0 else {
            throw ValidationError("--deadline must be a number of seconds, 0 or more")
        }
    }

    func run() throws {
        let start = ContinuousClock.now
        let original = try readPayload()
        let limit = Duration.milliseconds(Int64((deadline * 1000).rounded()))
        let container = Result { try AppGroupContainer(groupIdentifier: group, root: root.map { URL(fileURLWithPath: $0, isDirectory: true) }) }

        // The work runs on its own thread; this one keeps the deadline.
        let outcome = Mutex<Outcome?>(nil)
        let done = DispatchSemaphore(value: 0)
        let worker = Thread {
            let result: Outcome
            switch container {
            case .success(let container): result = Rewrite.outcome(for: original, in: container)
            case .failure(let error): result = .unchanged(reason: "cannot find the app group: \(error)")
            }
            outcome.withLock { $0 = result }
            done.signal()
        }
        worker.start()
        let remaining = limit - (ContinuousClock.now - start)
        let finished =
            remaining > .zero
            && done.wait(timeout: .now() + .nanoseconds(Int(remaining / .nanoseconds(1)))) == .success
        let result = outcome.withLock { $0 }
        if finished, ContinuousClock.now - start <= limit, let result {
            deliver(result, original: original)
        } else {
            deliver(.unchanged(reason: "the deadline of \(deadline) s passed before the sound was found"), original: original)
        }
        // The worker may still be blocked; do not wait for it.
        _exit(0)
    }

    private func readPayload() throws -> Data {
        let data: Data
        if let payloadFile {
            guard let contents = FileManager.default.contents(atPath: payloadFile) else {
                throw CommandFailure("cannot read the payload file \(payloadFile)")
            }
            data = contents
        } else {
            data = FileHandle.standardInput.readDataToEndOfFile()
        }
        guard data.contains(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }) else {
            throw CommandFailure("the payload is empty: there is no notification to deliver")
        }
        return data
    }

    private func deliver(_ outcome: Outcome, original: Data) {
        switch outcome {
        case .rewritten(let payload, _):
            writeAll(payload + Data("\n".utf8), to: STDOUT_FILENO)
        case .unchanged(let reason):
            writeAll(original, to: STDOUT_FILENO)
            Self.tool.printError("delivered unchanged: \(reason)")
        }
    }
}
