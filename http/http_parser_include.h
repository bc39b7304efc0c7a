// Node's http_parser (libhttp-parser-dev), C API, behind a warning shield.
#pragma once

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#include <http_parser.h>
#pragma GCC diagnostic pop
