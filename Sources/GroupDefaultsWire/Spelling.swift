/// The nearest of a few known words to a mistyped one, for "did you mean …?" in errors (an
/// option, a type flag, a typed-JSON tag).
package enum Spelling {
    /// The word of `candidates` nearest to `word` by edits (insertions, deletions, substitutions,
    /// swaps of neighbours, ignoring case), if it is close enough to be what was meant: at most one edit for a word of up
    /// to four characters, two for a longer one (`Integer` is near `integer`). Nil for an exact
    /// match or nothing close.
    package static func nearest(to word: String, among candidates: some Sequence<String>) -> String? {
        let typed = Array(word.lowercased())
        var best: (word: String, distance: Int)?
        for candidate in candidates {
            let distance = editDistance(typed, Array(candidate.lowercased()))
            if candidate != word, distance <= (typed.count <= 4 ? 1 : 2), distance < (best?.distance ?? .max) {
                best = (candidate, distance)
            }
        }
        return best?.word
    }

    /// Edits between two words: insertions, deletions, substitutions, and a swap of two neighbours
    /// (`prot` for `port`) counted as one (the optimal string alignment distance), row by row.
    private static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
        var beforePrevious: [Int] = []
        var previous = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var row = [i + 1]
            for (j, y) in b.enumerated() {
                var distance = Swift.min(previous[j + 1] + 1, row[j] + 1, previous[j] + (x == y ? 0 : 1))
                if i > 0, j > 0, x == b[j - 1], a[i - 1] == y { distance = Swift.min(distance, beforePrevious[j - 1] + 1) }
                row.append(distance)
            }
            beforePrevious = previous
            previous = row
        }
        return previous[b.count]
    }
}
