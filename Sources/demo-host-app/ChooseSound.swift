import ArgumentParser
import CommandLineSupport
import DemoSupport
import Foundation
import GroupDefaults

extension HostApp {
    struct ChooseSound: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Copy a sound into the group's Library/Sounds and store its name under `sound`.",
            discussion: """
                NAME must end in .aiff, .aif, .wav, .caf or .mp3, and FILE's bytes must be of that kind; \
                a WAV or AIFF file longer than 30 seconds is refused (iOS would not play it).

                Example: demo-host-app --group group.com.example.chat choose-sound ring.wav ~/ring.wav
                """
        )

        @ParentCommand var app: HostApp
        @Argument(help: "The sound's name in Library/Sounds, e.g. ring.wav.") var name: String
        @Argument(help: "The sound file to copy.") var file: String

        func run() throws {
            let sound: SoundFile
            do {
                sound = try SoundFile(name: name, path: file)
            } catch {
                throw CommandFailure("cannot choose '\(name)': \(error)")
            }
            let container = try app.group.container()
            let defaults = try SharedDefaults(appGroup: container)
            try copy(file, to: container.soundsDirectory.appendingPathComponent(name).path)
            try defaults.write { tx in try tx.set(.string(name), forKey: "sound") }
            let length = sound.duration.map { String(format: ", %.1f s", $0) } ?? ""
            output("sound = \(name) (\(sound.kind.rawValue)\(length))")
        }

        /// Copies through a temporary file and a rename, so that a reader never sees half a sound.
        private func copy(_ source: String, to destination: String) throws {
            let temporary = destination + ".partial-\(getpid())"
            let manager = FileManager.default
            try? manager.removeItem(atPath: temporary)
            do {
                try manager.copyItem(atPath: source, toPath: temporary)
                guard rename(temporary, destination) == 0 else {
                    throw CommandFailure("cannot move the sound into place at \(destination): \(String(cString: strerror(errno)))")
                }
            } catch let failure as CommandFailure {
                try? manager.removeItem(atPath: temporary)
                throw failure
            } catch {
                try? manager.removeItem(atPath: temporary)
                throw CommandFailure("cannot copy \(source) to \(destination): \((error as NSError).localizedDescription)")
            }
        }
    }
}
