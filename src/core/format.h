// Numbers as text for people and for files read back: a double in the fewest
// digits that parse back to the same value (std::to_chars' shortest round
// trip: 0.1, not the 0.10000000000000001 of printing max_digits10 digits).
// Pure and thread-safe.
#pragma once
#include <string>

namespace crucible {

// "0.1", "0.0125", "3e-04" (the shorter spelling), "1e+308", "inf", "-inf",
// "nan".
std::string format_double(double v);

// A magnitude for a progress line: "2.71k", "1.20M", "-3.05G"; below 1000
// three significant digits ("812", "5.43").
std::string format_si(double v);

}  // namespace crucible
