import ArgumentParser
import GroupDefaults

extension GroupDefaultsCommand {
    struct Info: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print facts about a suite: file, size, keys, map, last change, readers.",
            discussion: "Example: groupdefaults info group.com.example.chat")

        @OptionGroup var options: SuiteOptions
        @Argument(help: "The suite name, or the path of a .lmdb file.") var suite: String

        func run() throws {
            try perform {
                let info = try options.open(suite).info()
                output("""
                    path: \(info.path)
                    file size: \(info.fileSize) bytes
                    keys: \(info.keyCount)
                    map: \(info.usedBytes) of \(info.mapSize) bytes used (grows up to \(info.maximumMapSize))
                    last change: \(info.lastSequence)
                    readers: \(info.readers) of \(info.maximumReaders) slots
                    durability: \(info.durability == .fsyncEveryCommit ? "fsync every commit" : "process-crash safe")
                    origin: \(info.origin)
                    """)
            }
        }
    }
}
