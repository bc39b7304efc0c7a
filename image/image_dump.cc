// Test tool for image/pil_oracle.py (not a server binary):
//   ds41_image_dump plan [RATIO]            stdin: "width height" lines; stdout: one plan per line
//   ds41_image_dump image FILE RGB PATCHES [RATIO]
//                                           decodes FILE, prints its plan, writes the fitted RGB8
//                                           picture and the float32 patches to RGB and PATCHES
// RATIO sets max_wh_ratio (otherwise none, as the release). Exit 1 with the error on failure.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>

#include "image/image_decode.h"
#include "image/image_patches.h"
#include "image/image_plan.h"

namespace {

using namespace ds41::image;

void PrintPlan(const ds41::StatusOr<ImagePlan>& plan) {
  if (!plan.ok()) {
    std::printf("error\n");
    return;
  }
  std::printf("%d %d %d %d %d %d %d %lld\n", plan->best_width, plan->best_height, plan->n_vit_w, plan->n_vit_h,
              plan->n_llm_w, plan->n_llm_h, plan->pad ? 1 : 0, static_cast<long long>(NumImageTokens(*plan)));
}

int Fail(const std::string& msg) {
  std::fprintf(stderr, "%s\n", msg.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return Fail("usage: ds41_image_dump plan [RATIO] | image FILE RGB PATCHES [RATIO]");
  const std::string mode = argv[1];
  ImageGeometry g;
  if (mode == "plan") {
    if (argc > 2) g.max_wh_ratio = std::strtod(argv[2], nullptr);
    long long w = 0, h = 0;
    while (std::cin >> w >> h) PrintPlan(PlanImageGrid(w, h, g));
    return 0;
  }
  if (mode != "image" || argc < 5) return Fail("bad arguments");
  if (argc > 5) g.max_wh_ratio = std::strtod(argv[5], nullptr);
  std::ifstream in(argv[2], std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto rgb = DecodeImage(bytes, ImageLimits{});
  if (!rgb.ok()) return Fail(rgb.status().ToString());
  auto plan = PlanImageGrid(rgb->width, rgb->height, g);
  if (!plan.ok()) return Fail(plan.status().ToString());
  PrintPlan(plan);
  auto fitted = FitToPlan(*rgb, *plan);
  if (!fitted.ok()) return Fail(fitted.status().ToString());
  auto patches = ImagePatches(*rgb, *plan, g);
  if (!patches.ok()) return Fail(patches.status().ToString());
  std::ofstream(argv[3], std::ios::binary)
      .write(reinterpret_cast<const char*>(fitted->rgb.data()), static_cast<std::streamsize>(fitted->rgb.size()));
  std::ofstream(argv[4], std::ios::binary)
      .write(reinterpret_cast<const char*>(patches->data()), static_cast<std::streamsize>(patches->size() * 4));
  return 0;
}
