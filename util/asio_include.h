// Standalone Asio behind a warning shield: its headers are not -Wpedantic/-Wshadow clean.
#pragma once

#ifndef ASIO_STANDALONE
#define ASIO_STANDALONE
#endif
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <asio.hpp>
#pragma GCC diagnostic pop
