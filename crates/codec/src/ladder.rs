//! The layer ladder: which (spatial, temporal) cell is cumulative layer k, and its nominal rate.
//!
//! Cumulative layer k is one RTP stream; a receiver holding layers 0..=k decodes every cell
//! whose layer index is ≤ k. The default order is spatial-major ((0,0), (0,1), (0,2), (1,0), …):
//! rates then rise monotonically and every cell's dependencies — (s, t−1) temporally and
//! (s−1, t) through inter-layer prediction — sit in lower layers. Any order that keeps those
//! dependencies below a cell is accepted by [`LayerLadder::new`].

use crate::error::{Error, Result};

/// Default per-cell increments (kbit/s) for 720p30 L3T3: spatial layers 330 / 450 / 1590 kbit/s
/// (180p, 360p, 720p; 2370 in all). Chosen for access rates (docs/server.md "The default
/// ladder"): in the server's size-first order, announced cumulative rates of about 0.28 (180p
/// at 15 fps), 0.78 (360p15), 1.29 (360p30), 2.67 (720p15) and 3.46 Mbit/s (720p30), so that a
/// viewer behind a 1 or 3 Mbit/s link holds 360p15 or 720p15. The 720p layer's TL0 and TL1
/// take what fits under 2.7 Mbit/s (LCC's share of a 3 Mbit/s link), TL0 most of it (3.3:1:
/// 720p15 BD-rate +53 % against +60 % at 2.5:1, `rd_bench`), TL2 what fits a 4 Mbit/s link; the smaller layers give TL1/TL2 more so
/// that no cell falls below about two 600-byte packets per frame (the part-filled last packet
/// of a frame and its bunch's repair stay a small share of every layer).
pub const DEFAULT_L3T3_CELL_KBPS: [[u32; 3]; 3] = [[90, 80, 160], [225, 90, 135], [760, 230, 600]];

/// Default per-cell rates (kbit/s) for 720p30 L3T2, the server's default encode: each frame
/// rate keeps about its L3T3 budget (TL0 = L3T3's TL0 + TL1, TL1 = its TL2), less 30 kbit/s on
/// the 180p TL0 and 20 on the 720p TL0. Why less: an L3T2 layer's announced rate carries one
/// packet of slot rounding per 15-fps frame where L3T3's carried one per 7.5-fps frame, and
/// with these two every ladder point costs what it did in L3T3 or less (180p15 at 245 kbit/s
/// announced, under a 300 kbit/s link's share; 720p15 under LCC's share of 3 Mbit/s). Why two
/// temporal layers: a frame waits in its layer's constant-rate queue for about one frame
/// period of its temporal layer, 133 ms for L3T3's 7.5-fps TL0 against 67 ms here, and that
/// wait sets every viewer's playout buffer; and the 0212 pattern's third layer costs rate at
/// equal quality (docs/server.md "The default ladder", docs/codec.md "Rate-quality against one
/// plain stream").
pub const DEFAULT_L3T2_CELL_KBPS: [[u32; 2]; 3] = [[140, 160], [315, 135], [970, 600]];

/// Default per-cell rates (kbit/s) of an `ns`-spatial, `nt`-temporal encode (1..=3 each): the
/// top `ns` rows of [`DEFAULT_L3T2_CELL_KBPS`] (or [`DEFAULT_L3T3_CELL_KBPS`] for three
/// temporal layers; one temporal layer carries both L3T2 columns), times `scale`, every cell
/// at least 1 kbit/s (libvpx rejects a zero layer target).
pub fn default_cell_kbps(ns: usize, nt: usize, scale: f64) -> Vec<Vec<u32>> {
    let ns = ns.clamp(1, 3);
    let rows: Vec<Vec<u32>> = match nt {
        3.. => DEFAULT_L3T3_CELL_KBPS[3 - ns..]
            .iter()
            .map(|r| r.to_vec())
            .collect(),
        2 => DEFAULT_L3T2_CELL_KBPS[3 - ns..]
            .iter()
            .map(|r| r.to_vec())
            .collect(),
        _ => DEFAULT_L3T2_CELL_KBPS[3 - ns..]
            .iter()
            .map(|r| vec![r[0] + r[1]])
            .collect(),
    };
    rows.into_iter()
        .map(|row| {
            row.into_iter()
                .map(|r| ((r as f64 * scale).round() as u32).max(1))
                .collect()
        })
        .collect()
}

/// The order a ladder stacks its cells in (docs/server.md "The default ladder").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LayerOrder {
    /// (0,0), (0,1), (0,2), (1,0), …: each spatial layer at every frame rate before the next
    /// size. Every layer a holder adds is shown, but a viewer between a small picture at the
    /// full rate and a larger one at half of it gets the small one.
    SpatialMajor,
    /// Below the top spatial layer, the lower temporal layers of every size before the top
    /// temporal layer of any: L3T3 is (0,0), (0,1), (1,0), (1,1), (0,2), (1,2), then the top
    /// spatial layer's (2,0), (2,1), (2,2). A viewer gets 640x360 at half the frame rate for
    /// the rate 320x180 at the full rate cost (0.78 against 1.05 Mbit/s announced on the
    /// default ladder), and 640x360 at the full rate, as before, once it also holds (0,2)
    /// and (1,2); the price is a layer, (0,2), that shows nothing on its own.
    #[default]
    SizeFirst,
}

impl LayerOrder {
    /// The cells of an `ns` x `nt` grid in this order.
    pub fn cells(self, ns: u8, nt: u8) -> Vec<Cell> {
        let cell = |spatial, temporal| Cell { spatial, temporal };
        match self {
            LayerOrder::SpatialMajor => (0..ns)
                .flat_map(|s| (0..nt).map(move |t| cell(s, t)))
                .collect(),
            LayerOrder::SizeFirst => {
                let below = ns.saturating_sub(1);
                let top_t = nt.saturating_sub(1);
                let mut v: Vec<Cell> = (0..below)
                    .flat_map(|s| (0..top_t).map(move |t| cell(s, t)))
                    .collect();
                v.extend((0..below).map(|s| cell(s, top_t)));
                v.extend((0..nt).map(|t| cell(below, t)));
                v
            }
        }
    }

    /// The configuration name (`spatial-major`, `size-first`).
    pub fn name(self) -> &'static str {
        match self {
            LayerOrder::SpatialMajor => "spatial-major",
            LayerOrder::SizeFirst => "size-first",
        }
    }

    /// The order of a configuration name.
    pub fn parse(name: &str) -> Option<LayerOrder> {
        [LayerOrder::SpatialMajor, LayerOrder::SizeFirst]
            .into_iter()
            .find(|o| o.name() == name)
    }
}

/// One (spatial, temporal) cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cell {
    pub spatial: u8,
    pub temporal: u8,
}

/// Mapping from cumulative layer index to cell, with each layer's own nominal rate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerLadder {
    cells: Vec<Cell>,
    kbps: Vec<u32>,
    spatial_layers: u8,
    temporal_layers: u8,
}

impl LayerLadder {
    /// Ladder from an explicit order. Fails if a cell repeats, the grid is not complete, or a
    /// cell comes before one it depends on.
    pub fn new(cells: Vec<Cell>, kbps: Vec<u32>) -> Result<Self> {
        if cells.is_empty() || cells.len() != kbps.len() {
            return Err(Error::Config("ladder needs one rate per cell".into()));
        }
        let ns = cells.iter().map(|c| c.spatial).max().unwrap_or(0) + 1;
        let nt = cells.iter().map(|c| c.temporal).max().unwrap_or(0) + 1;
        if cells.len() != ns as usize * nt as usize || ns > 8 || nt > 8 {
            return Err(Error::Config(
                "ladder must cover a full spatial x temporal grid".into(),
            ));
        }
        for (k, c) in cells.iter().enumerate() {
            if cells[..k].contains(c) {
                return Err(Error::Config(format!("cell {c:?} repeated")));
            }
            let deps = [
                (c.temporal > 0).then(|| Cell {
                    spatial: c.spatial,
                    temporal: c.temporal - 1,
                }),
                (c.spatial > 0).then(|| Cell {
                    spatial: c.spatial - 1,
                    temporal: c.temporal,
                }),
            ];
            for d in deps.into_iter().flatten() {
                if !cells[..k].contains(&d) {
                    return Err(Error::Config(format!(
                        "cell {c:?} placed before its dependency {d:?}"
                    )));
                }
            }
        }
        Ok(LayerLadder {
            cells,
            kbps,
            spatial_layers: ns,
            temporal_layers: nt,
        })
    }

    /// Spatial-major ladder from per-cell rates `cell_kbps[s][t]`.
    pub fn spatial_major(cell_kbps: &[Vec<u32>]) -> Result<Self> {
        let mut cells = Vec::new();
        let mut kbps = Vec::new();
        for (s, row) in cell_kbps.iter().enumerate() {
            for (t, &r) in row.iter().enumerate() {
                cells.push(Cell {
                    spatial: s as u8,
                    temporal: t as u8,
                });
                kbps.push(r);
            }
        }
        Self::new(cells, kbps)
    }

    /// Ladder of per-cell rates `cell_kbps[s][t]` stacked in `order`.
    pub fn ordered(cell_kbps: &[Vec<u32>], order: LayerOrder) -> Result<Self> {
        let ns = cell_kbps.len();
        let nt = cell_kbps.first().map_or(0, Vec::len);
        if ns == 0 || nt == 0 || ns > 8 || nt > 8 || cell_kbps.iter().any(|r| r.len() != nt) {
            return Err(Error::Config(
                "ladder must cover a full spatial x temporal grid".into(),
            ));
        }
        let cells = order.cells(ns as u8, nt as u8);
        let kbps = cells
            .iter()
            .map(|c| cell_kbps[c.spatial as usize][c.temporal as usize])
            .collect();
        Self::new(cells, kbps)
    }

    /// The default 720p L3T3 ladder (9 layers), spatial-major (the order the codec's tests
    /// index layers by; the server's default order is [`LayerOrder::SizeFirst`]).
    pub fn default_720p_l3t3() -> Self {
        let rows: Vec<Vec<u32>> = DEFAULT_L3T3_CELL_KBPS.iter().map(|r| r.to_vec()).collect();
        Self::spatial_major(&rows).expect("default ladder is valid")
    }

    /// Number of layers.
    pub fn len(&self) -> usize {
        self.cells.len()
    }
    /// Always false for a constructed ladder.
    pub fn is_empty(&self) -> bool {
        self.cells.is_empty()
    }
    pub fn spatial_layers(&self) -> u8 {
        self.spatial_layers
    }
    pub fn temporal_layers(&self) -> u8 {
        self.temporal_layers
    }
    /// Cell of layer `k`.
    pub fn cell(&self, k: usize) -> Option<Cell> {
        self.cells.get(k).copied()
    }
    /// Layer index of a cell.
    pub fn layer_of(&self, spatial: u8, temporal: u8) -> Option<usize> {
        self.cells
            .iter()
            .position(|c| c.spatial == spatial && c.temporal == temporal)
    }
    /// Nominal own rate of layer `k` (kbit/s).
    pub fn layer_kbps(&self, k: usize) -> Option<u32> {
        self.kbps.get(k).copied()
    }
    /// Nominal cumulative rate of layers 0..=k (kbit/s).
    pub fn cumulative_kbps(&self, k: usize) -> u32 {
        self.kbps.iter().take(k + 1).sum()
    }
    /// Per-cell rates as `[s][t]`, for [`crate::vpx::SvcConfig::cell_kbps`].
    pub fn cell_kbps(&self) -> Vec<Vec<u32>> {
        let mut m = vec![vec![0; self.temporal_layers as usize]; self.spatial_layers as usize];
        for (c, &r) in self.cells.iter().zip(&self.kbps) {
            m[c.spatial as usize][c.temporal as usize] = r;
        }
        m
    }
    /// Whether a holder of layers 0..=k keeps cell (s, t).
    pub fn keeps(&self, k: usize, spatial: u8, temporal: u8) -> bool {
        self.layer_of(spatial, temporal).is_some_and(|l| l <= k)
    }
    /// The *steady* spatial layer of a holder of layers 0..=k: the highest one it holds at
    /// half the full frame rate or more (the 0212 / 01 temporal patterns are dyadic: TL0..=t
    /// carries 2^(t+1-T) of the pictures); 0 when none is. The player shows the pictures that
    /// reach it (docs/player.md "Steady resolution").
    pub fn steady_spatial(&self, k: usize) -> u8 {
        let nt = self.temporal_layers.max(1);
        (0..self.spatial_layers)
            .rev()
            .find(|&s| {
                self.max_temporal(k, s)
                    .is_some_and(|t| t.min(nt - 1) + 2 >= nt)
            })
            .unwrap_or(0)
    }
    /// Highest temporal layer kept in spatial layer `s` by a holder of 0..=k (None: none).
    pub fn max_temporal(&self, k: usize, spatial: u8) -> Option<u8> {
        self.cells
            .iter()
            .take(k + 1)
            .filter(|c| c.spatial == spatial)
            .map(|c| c.temporal)
            .max()
    }
}

/// Per-cell rates `base[s][t]` scaled so that they sum to `total_kbps`, keeping their
/// proportions (largest-remainder rounding, so the sum is exact and `sum(base)` gives
/// `base` back), every cell at least 1 kbit/s (libvpx rejects a zero layer target): a cell
/// rounded to zero gets 1 kbit/s from the largest cell. Used when one total target drives a
/// whole SVC encode (a TFMCC session follows its X_send, docs/protocols/tfmcc.md "Live
/// video"). A `total_kbps` below the number of cells gives every cell 1 kbit/s; an empty
/// or all-zero `base` is returned unchanged.
pub fn scale_cells(base: &[Vec<u32>], total_kbps: u32) -> Vec<Vec<u32>> {
    let n: usize = base.iter().map(Vec::len).sum();
    let sum: u64 = base.iter().flatten().map(|&r| r as u64).sum();
    if n == 0 || sum == 0 {
        return base.to_vec();
    }
    let total = total_kbps as u64;
    let mut out: Vec<Vec<u32>> = Vec::with_capacity(base.len());
    let mut rems: Vec<(u64, usize, usize)> = Vec::with_capacity(n);
    let mut given = 0u64;
    for (s, row) in base.iter().enumerate() {
        let mut r_out = Vec::with_capacity(row.len());
        for (t, &r) in row.iter().enumerate() {
            let exact = total * r as u64;
            given += exact / sum;
            rems.push((exact % sum, s, t));
            r_out.push((exact / sum) as u32);
        }
        out.push(r_out);
    }
    // The rounding remainder goes to the largest fractional parts (ties: lowest cell).
    rems.sort_by(|a, b| b.0.cmp(&a.0).then((a.1, a.2).cmp(&(b.1, b.2))));
    for &(_, s, t) in rems.iter().take((total - given) as usize) {
        out[s][t] += 1;
    }
    // The 1 kbit/s floor, paid for by the largest cell while it can afford it.
    for s in 0..out.len() {
        for t in 0..out[s].len() {
            if out[s][t] == 0 {
                out[s][t] = 1;
                let (mut bs, mut bt) = (s, t);
                for (s2, row) in out.iter().enumerate() {
                    for (t2, &r) in row.iter().enumerate() {
                        if r > out[bs][bt] {
                            (bs, bt) = (s2, t2);
                        }
                    }
                }
                if out[bs][bt] > 1 {
                    out[bs][bt] -= 1;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_cells_per_temporal_layer_count() {
        assert_eq!(default_cell_kbps(3, 3, 1.0)[2], vec![760, 230, 600]);
        assert_eq!(
            default_cell_kbps(3, 2, 1.0),
            vec![vec![140, 160], vec![315, 135], vec![970, 600]]
        );
        // Each frame rate keeps its L3T3 budget but the 180p and 720p TL0's (see the table).
        let l3t3 = DEFAULT_L3T3_CELL_KBPS;
        let less = [30, 0, 20];
        for (s, row) in DEFAULT_L3T2_CELL_KBPS.iter().enumerate() {
            assert_eq!(row[1], l3t3[s][2]);
            assert_eq!(row[0] + less[s], l3t3[s][0] + l3t3[s][1], "S{s}");
        }
        assert_eq!(default_cell_kbps(2, 1, 1.0), vec![vec![450], vec![1570]]);
        assert_eq!(default_cell_kbps(1, 2, 0.5), vec![vec![485, 300]]);
        // Every cell stays above zero (libvpx rejects a zero layer target).
        assert!(default_cell_kbps(3, 3, 0.001)
            .iter()
            .flatten()
            .all(|&r| r == 1));
    }

    #[test]
    fn orders_keep_every_dependency_below_a_cell() {
        let st = |o: LayerOrder, ns, nt| -> Vec<(u8, u8)> {
            o.cells(ns, nt)
                .iter()
                .map(|c| (c.spatial, c.temporal))
                .collect()
        };
        assert_eq!(
            st(LayerOrder::SizeFirst, 3, 3),
            [
                (0, 0),
                (0, 1),
                (1, 0),
                (1, 1),
                (0, 2),
                (1, 2),
                (2, 0),
                (2, 1),
                (2, 2)
            ]
        );
        assert_eq!(
            st(LayerOrder::SizeFirst, 3, 2),
            [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (2, 1)]
        );
        // One spatial or one temporal layer, or two spatial layers: nothing to reorder.
        for (ns, nt) in [(1, 3), (3, 1), (2, 3), (1, 1)] {
            assert_eq!(
                st(LayerOrder::SizeFirst, ns, nt),
                st(LayerOrder::SpatialMajor, ns, nt),
                "L{ns}T{nt}"
            );
        }
        for o in [LayerOrder::SpatialMajor, LayerOrder::SizeFirst] {
            assert_eq!(LayerOrder::parse(o.name()), Some(o));
            for ns in 1..=3 {
                for nt in 1..=3 {
                    let rows = vec![vec![10; nt as usize]; ns as usize];
                    let l = LayerLadder::ordered(&rows, o).unwrap();
                    assert_eq!(l.len(), (ns * nt) as usize);
                    assert_eq!(l.cell_kbps(), rows);
                }
            }
        }
        assert_eq!(LayerOrder::parse("temporal-major"), None);
        // A 360p15 holder of the default grid in size-first order: 4 layers, no 180p TL2.
        let rows: Vec<Vec<u32>> = DEFAULT_L3T3_CELL_KBPS.iter().map(|r| r.to_vec()).collect();
        let l = LayerLadder::ordered(&rows, LayerOrder::SizeFirst).unwrap();
        assert_eq!(l.max_temporal(3, 1), Some(1));
        assert!(!l.keeps(3, 0, 2));
        assert!(LayerLadder::ordered(&[vec![1, 2], vec![3]], LayerOrder::SizeFirst).is_err());
    }

    #[test]
    fn default_ladder() {
        let l = LayerLadder::default_720p_l3t3();
        assert_eq!(l.len(), 9);
        assert_eq!(
            l.cell(3),
            Some(Cell {
                spatial: 1,
                temporal: 0
            })
        );
        assert_eq!(l.layer_of(2, 2), Some(8));
        assert_eq!(l.cumulative_kbps(0), 90);
        assert_eq!(l.cumulative_kbps(8), 2370);
        assert!(l.keeps(3, 0, 2));
        assert!(!l.keeps(3, 1, 1));
        assert_eq!(l.max_temporal(4, 1), Some(1));
        assert_eq!(l.max_temporal(2, 1), None);
        // Rates rise monotonically with k.
        for k in 1..9 {
            assert!(l.cumulative_kbps(k) > l.cumulative_kbps(k - 1));
        }
    }

    #[test]
    fn temporal_major_is_valid_and_bad_order_rejected() {
        let c = |s, t| Cell {
            spatial: s,
            temporal: t,
        };
        let tm = vec![c(0, 0), c(1, 0), c(0, 1), c(1, 1)];
        assert!(LayerLadder::new(tm, vec![1; 4]).is_ok());
        let bad = vec![c(0, 0), c(1, 1), c(0, 1), c(1, 0)];
        assert!(LayerLadder::new(bad, vec![1; 4]).is_err());
        let dup = vec![c(0, 0), c(0, 0)];
        assert!(LayerLadder::new(dup, vec![1; 2]).is_err());
    }

    #[test]
    fn scale_cells_keeps_proportions_and_the_exact_total() {
        let base: Vec<Vec<u32>> = DEFAULT_L3T3_CELL_KBPS.iter().map(|r| r.to_vec()).collect();
        for total in [9u32, 10, 100, 500, 777, 2370, 4740, 10_000] {
            let c = scale_cells(&base, total);
            let got: u32 = c.iter().flatten().sum();
            assert_eq!(got, total, "total {total}: {c:?}");
            assert!(c.iter().flatten().all(|&r| r >= 1));
            // Every cell keeps its share within the rounding and the floor's cost (at most
            // one kbit/s per cell taken from the largest).
            for (s, row) in c.iter().enumerate() {
                for (t, &r) in row.iter().enumerate() {
                    let want = total as f64 * base[s][t] as f64 / 2370.0;
                    assert!((r as f64 - want).abs() <= 9.0, "{total} ({s},{t}): {c:?}");
                }
            }
        }
        // The base total gives the base ladder back; half of it halves every cell.
        assert_eq!(scale_cells(&base, 2370), base);
        assert_eq!(scale_cells(&base, 1185)[2], vec![380, 115, 300]);
        // Below one kbit/s per cell: every cell at the floor.
        assert!(scale_cells(&base, 3).iter().flatten().all(|&r| r == 1));
        assert_eq!(scale_cells(&[], 100), Vec::<Vec<u32>>::new());
    }
}
