"""The training step as a program (docs/model.md §3): the one place its order of work is written.

Per micro-batch: the embedding's weights; per layer forward, attention in G tiles, then an MoE layer's
router, dispatch, experts and combine (in place: expand, experts, weighted sum) or a dense layer's FFN;
the LM head and loss per tile; then the backward pass from the last layer down, each layer first
recomputed forward where the activation policy says so; every weight gradient handed to the outbound
link as it is made. The step ends when the last gradient has left (in a cluster: when its sum has come
through the reduce tree) and MemoryX has updated every weight with it.
"""

from __future__ import annotations

from typing import Any

from ....config.specs import DTYPE_BYTES
from ....model.shapes import BACKWARD_OPS, FORWARD_OPS, LayerShapes, copy_op_flops, wafer_op, wafer_op_matmuls
from ....model.vocabulary import Copy, Gradient, OpKind, Pass, Tensor
from ..chunks import plan_chunks
from ..plan import StepPlan
from ..program import Drain, Experts, GradientOut, Op, OptimizerStep, Program, Transfer, WaferOp, Weights

__all__ = ["micro_batch_ops", "training_program"]


class _Builder:
    def __init__(self, plan: StepPlan, rec_pass: Copy) -> None:
        self.plan, m, t = plan, plan.model, plan.training
        self.s = LayerShapes(m)
        self.grad_bytes = DTYPE_BYTES[t.weight_gradient_dtype]  # bytes per weight gradient value
        self.recompute = t.activations == "recompute"
        self.rec_copy = Copy(rec_pass)
        self.in_place = plan.moe_mapping == "in_place"
        self.ops: list[Op] = []

    # ------------------------------------------------------------------------------------ op makers
    def weights(self, key: tuple[Any, ...], args: dict[str, Any]) -> None:
        self.ops.append(Weights(key, args))

    def wafer(self, kind: OpKind, tokens: int, backward: bool, args: dict[str, Any], tiles: int = 0) -> None:
        t = self.plan.training
        flops, weight_bytes = wafer_op(self.s, kind, tokens, t.seq_len, t.attention_kernel, backward)
        matmuls = wafer_op_matmuls(self.s, kind, tokens, t.seq_len, t.attention_kernel, backward)
        self.ops.append(WaferOp(kind, args["pass"], args.get("layer"), flops, weight_bytes, matmuls, tiles,
                                args=args))

    def gradient(self, gradient: Gradient, params: float, args: dict[str, Any]) -> None:
        self.ops.append(GradientOut(gradient, params * self.grad_bytes, args))

    # ------------------------------------------------------------------------------------ sub-blocks
    def attention(self, layer: int, pass_: Pass, backward: bool) -> None:
        """G tiles of B sequences on the whole wafer; the weights stay resident across the tiles."""
        tokens = self.plan.batch_per_tile * self.plan.training.seq_len
        self.wafer(OpKind.ATTENTION, tokens, backward, {"layer": layer, "pass": pass_, "tokens": tokens},
                   tiles=self.plan.tiles)

    def moe(self, layer: int, pass_: Pass, copy: Copy, backward: bool) -> None:
        p, tokens = self.plan, self.plan.global_batch * self.plan.training.seq_len
        args = {"layer": layer, "pass": pass_, "tokens": tokens}
        self.weights((copy, layer, Tensor.ROUTER), args)
        self.wafer(OpKind.ROUTER, tokens, backward, args)
        first, last = ((OpKind.EXPAND, OpKind.WEIGHTED_SUM) if self.in_place
                       else (OpKind.DISPATCH, OpKind.COMBINE))
        if backward:
            first, last = last, first
        self.around_experts(first, layer, pass_, backward, reverse=False)
        experts = self.s.expert_op_flops
        routed = float(p.tokens[layer].sum())
        flops = sum(experts(op, routed, backward) for op in (BACKWARD_OPS if backward else FORWARD_OPS))
        self.ops.append(Experts(pass_, layer, copy, backward, float(flops), {"layer": layer, "pass": pass_}))
        self.around_experts(last, layer, pass_, backward, reverse=True)

    def around_experts(self, kind: OpKind, layer: int, pass_: Pass, backward: bool, reverse: bool) -> None:
        """Into or out of the experts: over the fabric to their regions, or, in place, the copy ops."""
        p = self.plan
        if self.in_place:
            flops, useful = copy_op_flops(self.s, p.global_batch * p.training.seq_len, kind, backward)
            self.ops.append(WaferOp(kind, pass_, layer, flops, useful=useful,
                                    args={"layer": layer, "pass": pass_, "copies": p.model.top_k}))
            return
        nbytes = float(p.tokens[layer].sum()) * p.model.hidden_size * p.model.bytes_per_value
        self.ops.append(Transfer(kind, layer, reverse, nbytes, {"layer": layer, "pass": pass_}))

    def ffn(self, layer: int, pass_: Pass, copy: Copy, backward: bool) -> None:
        """A dense layer's FFN on the micro-batch's G·B sequences at once, its weights streamed per layer."""
        tokens = self.plan.global_batch * self.plan.training.seq_len
        args = {"layer": layer, "pass": pass_, "tokens": tokens}
        self.weights((copy, layer, Tensor.FFN), args)
        self.wafer(OpKind.FFN, tokens, backward, args)

    def forward(self, layer: int, pass_: Pass, copy: Copy) -> None:
        m = self.plan.model
        self.weights((copy, layer, Tensor.ATTENTION), {"layer": layer, "pass": pass_})
        # a recompute rebuilds the MoE/FFN input with attention unless its output was kept (once) or the
        # block is parallel (the FFN reads the layer's input)
        if pass_ != Pass.RECOMPUTE or (self.plan.training.attention_recompute == "twice"
                                       and not m.parallel_block):
            self.attention(layer, pass_, backward=False)
        if m.is_dense(layer):
            self.ffn(layer, pass_, copy, backward=False)
        else:
            self.moe(layer, pass_, copy, backward=False)

    def backward(self, layer: int) -> None:
        s, args = self.s, {"layer": layer, "pass": Pass.BWD}
        if self.recompute:
            self.forward(layer, Pass.RECOMPUTE, self.rec_copy)
        else:  # (a dense layer's backward starts with its FFN)
            first = Tensor.FFN if self.plan.model.is_dense(layer) else Tensor.ROUTER
            self.weights((Copy.BWD, layer, first), dict(args))
        if self.plan.model.is_dense(layer):
            self.ffn(layer, Pass.BWD, Copy.BWD, backward=True)
            self.gradient(Gradient.FFN, s.ffn_params, dict(args))
        else:
            self.moe(layer, Pass.BWD, Copy.BWD, backward=True)
            self.gradient(Gradient.ROUTER, s.router_stage_params, dict(args))
        self.weights((Copy.BWD, layer, Tensor.ATTENTION), dict(args))
        if self.recompute:  # one tile's attention internals fit at a time: recompute them per tile
            self.attention(layer, Pass.RECOMPUTE, backward=False)
        self.attention(layer, Pass.BWD, backward=True)
        self.gradient(Gradient.ATTENTION, s.attention_params, dict(args))

    def lm_head(self) -> None:
        """LM head and loss per tile, forward and backward together (its weights resident)."""
        s = self.s
        if s.lm_head_params:
            self.weights((Tensor.LM_HEAD,), {"pass": Pass.FWD})
        tokens = self.plan.batch_per_tile * self.plan.training.seq_len
        self.wafer(OpKind.LM_HEAD, tokens, False, {"pass": Pass.FWD_BWD, "tokens": tokens},
                   tiles=self.plan.tiles)
        if s.lm_head_params:
            self.gradient(Gradient.LM_HEAD, s.lm_head_params, {})

    def micro_batch(self) -> tuple[Op, ...]:
        """One forward and backward pass over a micro-batch; its gradients stream out as they come (the
        next micro-batch does not wait for them: MemoryX accumulates them, docs/model.md §2.4)."""
        layers = self.plan.model.layers
        self.weights((Tensor.EMBEDDING,), {"pass": Pass.FWD})
        for layer in range(layers):
            self.forward(layer, Pass.FWD, Copy.FWD)
        self.lm_head()
        for layer in reversed(range(layers)):
            self.backward(layer)
        self.gradient(Gradient.EMBEDDING, self.s.embedding_params, {})
        return tuple(self.ops)


def training_program(plan: StepPlan) -> Program:
    """The training step of ``plan`` as a program: one micro-batch's ops, run ``plan.micro_batches``
    times, then the drains that end the step (the reduce tree's only in a cluster) and MemoryX's
    optimizer step (docs/model.md §2.5); it carries the chunk plan its weight waits refer to."""
    chunks = plan_chunks(plan.hw, plan.model, plan.training.activations == "recompute", plan.micro_batches)
    body = _Builder(plan, chunks.rec_pass).micro_batch()
    tail: list[Op] = [Drain(OpKind.GRADIENT_DRAIN)]
    if plan.tree is not None:
        tail.append(Drain(OpKind.REDUCE_DRAIN, {"levels": plan.tree.depth}))
    tail.append(OptimizerStep())
    return Program(body, plan.micro_batches, tuple(tail), chunks)


def micro_batch_ops(plan: StepPlan) -> tuple[Op, ...]:
    """One micro-batch's ops of ``plan``, in the order the step runs them, without a chunk plan: what a
    GPU runs (its weights stay in its HBM; nothing streams, docs/model.md §13.8)."""
    return _Builder(plan, Copy.BWD).micro_batch()
