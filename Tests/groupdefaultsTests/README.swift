// The tests of the groupdefaults tool run its binary; see the other files of this target.
