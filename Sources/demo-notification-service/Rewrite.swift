import CommandLineSupport
import DemoSupport
import Foundation
import GroupDefaults
import PropertyListFormats

/// What to deliver.
enum Outcome: Sendable {
    /// The payload with `aps.sound` set, as JSON.
    case rewritten(Data, sound: String)
    /// The original payload, and why it was not changed.
    case unchanged(reason: String)
}

/// The decision of the notification service: the payload with the chosen sound, or why not.
enum Rewrite {
    static func outcome(for original: Data, in container: AppGroupContainer) -> Outcome {
        let payload: JSONValue
        do {
            payload = try JSONDecoder().decode(JSONValue.self, from: original)
        } catch {
            return .unchanged(reason: "the payload is not valid JSON")
        }
        guard case .object(var root) = payload else {
            return .unchanged(reason: "the payload is not a JSON object")
        }
        guard case .object(var aps)? = root["aps"] else {
            return .unchanged(reason: "the payload has no aps dictionary")
        }
        guard aps["mutable-content"] == .integer(1) else {
            return .unchanged(reason: "aps.mutable-content is not 1, so the service may not change it")
        }

        let chosen: PropertyListValue?
        do {
            let defaults = try SharedDefaults(
                existingSuiteName: container.groupIdentifier,
                directory: container.preferencesDirectory
            )
            chosen = try defaults.read { tx in try tx.value(forKey: "sound") }
        } catch SharedDefaultsError.Code.suiteNotFound {
            return .unchanged(reason: "no sound chosen (the group has no settings yet)")
        } catch {
            return .unchanged(reason: "cannot read the group's settings: \(error)")
        }
        guard let chosen else { return .unchanged(reason: "no sound chosen") }
        guard case .string(let name) = chosen else {
            return .unchanged(reason: "the chosen sound is not a file name: \(chosen.openStepText)")
        }
        do {
            _ = try SoundFile(name: name, path: container.soundsDirectory.appendingPathComponent(name).path)
        } catch {
            return .unchanged(reason: "the chosen sound cannot be played: \(error)")
        }

        // A critical alert's sound is a dictionary: set its name, keep the rest.
        if case .object(var sound)? = aps["sound"] {
            sound["name"] = .string(name)
            aps["sound"] = .object(sound)
        } else {
            aps["sound"] = .string(name)
        }
        root["aps"] = .object(aps)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(JSONValue.object(root)) else {
            return .unchanged(reason: "the rewritten payload cannot be encoded")
        }
        return .rewritten(data, sound: name)
    }
}
