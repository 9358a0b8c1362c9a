# muster_unity(TARGET BATCH): builds TARGET as unity batches of BATCH files when MUSTER_UNITY is
# on. For the LibTorch targets: each file that includes LibTorch spends about 10 s before its
# first line on the 2-core VM (6 s loading the 650 MB precompiled header, 4 s emitting what
# LibTorch's headers define), so a batch of 8 files builds in about the time of 2. Off: one
# object a file, slower from scratch and quicker to rebuild after editing one file.
# Files in one batch share a translation unit, so names in their anonymous namespaces must
# differ (the build fails on a clash of the same signature).
option(MUSTER_UNITY "muster: build the LibTorch targets in unity batches" ON)
function(muster_unity target batch)
  if(MUSTER_UNITY)
    set_target_properties(${target} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${batch})
  endif()
endfunction()
