#!/usr/bin/python3
"""The model muster-train trains, written in eager PyTorch (Debian's python3-torch 1.13), for
bench/compare_train.sh: the same decoder (RMSNorm, rotary GQA attention with q/k norms (PyTorch 2's
scaled_dot_product_attention where it has it, as muster-train on a GPU), SwiGLU,
MoE blocks with a softmax top-k router, load-balancing loss, per-expert dispatch), the same loss
per label token, AdamW, clipping, on rows of the same width from the same text files.

    moe_reference.py --layers 4 --hidden 256 ... --steps 20 --threads 2 [--data DIR]
        [--device cuda] [--precision bf16] [--compile]

--device cuda runs it on the GPU (bench/compare_train_gpu.sh), --precision bf16 under
torch.autocast (fp32 weights, as muster's train.precision = bf16), --compile through
torch.compile (PyTorch 2), region by region: each layer's norms and attention, the dense MLP and
every expert's SwiGLU (its row count dynamic), the router and dispatch left eager. The whole
model in one torch.compile recompiles at every new expert token count (the dispatch reads the
counts on the host) and did not finish its first step in 200 s on an H100.

Prints one line per step: "step N tok/s X loss Y" (X: this rank's tokens per second). With
WORLD_SIZE > 1 in the environment (and RANK, MASTER_ADDR, MASTER_PORT) it is data parallel over
Gloo: each rank reads its own rows and the gradients are summed in one flat all_reduce a step
(what DDP does in buckets, without its bookkeeping for experts a step left unused); rank 0
prints. Not a copy of muster's code: a reference
an ML engineer would write in Python, to measure muster against.
"""
import argparse
import math
import os
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotary(positions, head_dim, theta=10000.0):
    inv = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64, device=positions.device) / head_dim)
    angles = positions.double().unsqueeze(-1) * inv
    angles = torch.cat([angles, angles], -1)
    return angles.cos().float(), angles.sin().float()


def apply_rotary(x, cos, sin):
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos.unsqueeze(1) + rotated * sin.unsqueeze(1)


class Attention(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.heads, self.kv, self.hd = a.heads, a.kv_heads, a.hidden // a.heads
        self.q_proj = nn.Linear(a.hidden, self.heads * self.hd, bias=False)
        self.k_proj = nn.Linear(a.hidden, self.kv * self.hd, bias=False)
        self.v_proj = nn.Linear(a.hidden, self.kv * self.hd, bias=False)
        self.o_proj = nn.Linear(self.heads * self.hd, a.hidden, bias=False)
        self.q_norm, self.k_norm = RMSNorm(self.hd), RMSNorm(self.hd)

    def forward(self, x, cos, sin, mask):
        b, s, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(b, s, self.heads, self.hd).transpose(1, 2))
        k = self.k_norm(self.k_proj(x).view(b, s, self.kv, self.hd).transpose(1, 2))
        v = self.v_proj(x).view(b, s, self.kv, self.hd).transpose(1, 2)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        group = self.heads // self.kv
        k, v = k.repeat_interleave(group, 1), v.repeat_interleave(group, 1)
        if hasattr(F, "scaled_dot_product_attention"):  # PyTorch 2.x: its fused attention
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        else:
            scores = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd)
            out = torch.softmax(scores.masked_fill(~mask, float("-inf")), -1) @ v
        return self.o_proj(out.transpose(1, 2).reshape(b, s, -1))


class SwiGLU(nn.Module):
    def __init__(self, hidden, ffn):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, ffn, bias=False)
        self.up_proj = nn.Linear(hidden, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class MoE(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.topk, self.num_experts, self.coeff = a.topk, a.experts, a.aux_coeff
        self.gate = nn.Linear(a.hidden, a.experts, bias=False)
        self.experts = nn.ModuleList(SwiGLU(a.hidden, a.moe_ffn) for _ in range(a.experts))

    def forward(self, x):
        t = x.shape[0]
        probs = torch.softmax(self.gate(x), -1)
        top, chosen = probs.topk(self.topk, -1)
        top = top / top.sum(-1, keepdim=True)
        counts = torch.bincount(chosen.flatten(), minlength=self.num_experts)
        aux = (probs.sum(0) * counts).sum() * (self.coeff * self.num_experts / (t * t * self.topk))
        out = torch.zeros_like(x)
        flat = chosen.flatten()
        order = flat.argsort(stable=True)
        token = torch.arange(t, device=x.device).repeat_interleave(self.topk)[order]
        weight = top.flatten()[order]
        begin = 0
        for e, n in enumerate(counts.tolist()):
            if n == 0:
                continue
            idx = token[begin:begin + n]
            y = self.experts[e](x[idx]) * weight[begin:begin + n, None]
            out.index_add_(0, idx, y.to(out.dtype))
            begin += n
        return out, aux


class Layer(nn.Module):
    def __init__(self, a, moe):
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(a.hidden), RMSNorm(a.hidden)
        self.self_attn = Attention(a)
        self.mlp = MoE(a) if moe else SwiGLU(a.hidden, a.ffn)

    def forward(self, x, cos, sin, mask):
        h = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        n = self.post_attention_layernorm(h)
        if isinstance(self.mlp, MoE):
            y, aux = self.mlp(n.reshape(-1, n.shape[-1]))
            return h + y.view_as(n), aux
        return h + self.mlp(n), torch.zeros((), device=x.device)


class Model(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.embed_tokens = nn.Embedding(256, a.hidden)
        self.layers = nn.ModuleList(Layer(a, i >= a.first_dense) for i in range(a.layers))
        self.norm = RMSNorm(a.hidden)
        self.lm_head = nn.Linear(a.hidden, 256, bias=False)
        self.head_dim = a.hidden // a.heads
        for name, p in self.named_parameters():
            if not name.endswith("norm.weight"):
                nn.init.normal_(p, 0.0, 0.02)

    def forward(self, tokens):
        b, s = tokens.shape
        positions = torch.arange(s, device=tokens.device).expand(b, s)
        cos, sin = rotary(positions, self.head_dim)
        mask = torch.ones(s, s, dtype=torch.bool, device=tokens.device).tril().expand(b, 1, s, s)
        x, aux = self.embed_tokens(tokens), torch.zeros((), device=tokens.device)
        for layer in self.layers:
            x, a = layer(x, cos, sin, mask)
            aux = aux + a
        return self.lm_head(self.norm(x)), aux


def compile_regions(model):
    """torch.compile over the parts of fixed shape and over each expert (rows dynamic); the
    router's top-k and the per-expert dispatch, which read the token counts, stay eager."""
    for layer in model.layers:
        layer.input_layernorm = torch.compile(layer.input_layernorm)
        layer.post_attention_layernorm = torch.compile(layer.post_attention_layernorm)
        layer.self_attn = torch.compile(layer.self_attn)
        if isinstance(layer.mlp, MoE):
            layer.mlp.experts = nn.ModuleList(torch.compile(e, dynamic=True)
                                              for e in layer.mlp.experts)
        else:
            layer.mlp = torch.compile(layer.mlp)
    model.norm = torch.compile(model.norm)


def rows_of(folder, width):
    data = bytearray()
    for root, _, files in sorted(os.walk(folder)):
        for f in sorted(files):
            with open(os.path.join(root, f), "rb") as fh:
                data += fh.read()
    t = torch.tensor(list(data), dtype=torch.int64)
    n = t.numel() // width
    return t[: n * width].view(n, width)


def main():
    p = argparse.ArgumentParser()
    for name, default in [("layers", 4), ("hidden", 256), ("ffn", 1024), ("heads", 8),
                          ("kv_heads", 4), ("experts", 8), ("moe_ffn", 256), ("topk", 2),
                          ("first_dense", 1), ("seq", 256), ("micro", 4), ("steps", 20),
                          ("threads", 1)]:
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--aux_coeff", type=float, default=1e-3)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--data", default="/usr/share/common-licenses")
    p.add_argument("--device", default="cpu")
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16"])
    p.add_argument("--compile", action="store_true")
    p.add_argument("--profile", default="",
                   help="FILE: profile steps 5 and 6 with torch.profiler, its table by total "
                        "time into FILE (as muster-train's train.profile_step_start/end)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1234)
    device = torch.device(a.device)
    model = Model(a).to(device)
    decay = [p for n, p in model.named_parameters() if not n.endswith("norm.weight")]
    plain = [p for n, p in model.named_parameters() if n.endswith("norm.weight")]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": plain, "weight_decay": 0.0}], lr=a.lr, betas=(0.9, 0.95))
    if a.compile:  # after the groups: a compiled module's parameters are named _orig_mod.*
        if not hasattr(torch, "compile"):
            raise SystemExit("moe_reference.py: --compile needs PyTorch 2 "
                             f"(this is {torch.__version__})")
        compile_regions(model)
    run = model
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        import torch.distributed as dist
        dist.init_process_group("gloo", rank=rank, world_size=world)
    params = list(model.parameters())
    rows = rows_of(a.data, a.seq).to(device)
    profiler = None
    for step in range(a.steps):
        if a.profile and step + 1 == 5:
            activities = [torch.profiler.ProfilerActivity.CPU]
            if device.type == "cuda":
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            profiler = torch.profiler.profile(activities=activities)
            profiler.__enter__()
        start = time.perf_counter()
        first = ((step * world + rank) * a.micro) % (rows.shape[0] - a.micro)
        batch = rows[first:][: a.micro]
        labels = torch.roll(batch, -1, 1)
        labels[:, -1] = -100
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            logits, aux = run(batch)
        lm = F.cross_entropy(logits.float().reshape(-1, 256), labels.reshape(-1), ignore_index=-100,
                             reduction="sum")
        loss = lm / (labels >= 0).sum() + aux
        opt.zero_grad()
        loss.backward()
        if world > 1:
            grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
            flat = torch._utils._flatten_dense_tensors(grads)
            dist.all_reduce(flat)
            flat /= world
            for p, g in zip(params, torch._utils._unflatten_dense_tensors(flat, grads)):
                p.grad = g
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - start
        if profiler is not None and step + 1 == 6:
            profiler.__exit__(None, None, None)
            by = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
            with open(a.profile, "w") as out:
                out.write(profiler.key_averages().table(sort_by=by, row_limit=40) + "\n")
                out.write(profiler.key_averages().table(sort_by="cpu_time_total", row_limit=25))
            profiler = None
        if rank != 0:
            continue
        print(f"step {step + 1} tok/s {batch.numel() / elapsed:.0f} loss "
              f"{(lm / (labels >= 0).sum()).item():.4f}", flush=True)


if __name__ == "__main__":
    main()
