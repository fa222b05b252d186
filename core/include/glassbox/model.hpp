// The model seam in one include: config, file formats (ModelSource), typed weights, the transformer.
#pragma once
#include "glassbox/model/config.hpp"
#include "glassbox/model/model_source.hpp"
#include "glassbox/forward/transformer.hpp"
#include "glassbox/model/weights.hpp"
