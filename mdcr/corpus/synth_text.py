"""Topical English-like text for the synthetic S2ORC corpus: vocabularies and templates.

Why real words: the corpus must exercise both lexical retrieval (BM25) and neural
sentence encoders (all-MiniLM-L6-v2). An encoder trained on English only separates
topics whose words it knows, so every field below has a hand-curated list of real
domain terms, and every topic within a field its own list of real terms and phrases.
Sentences come from academic templates whose slots are filled with those terms, so an
abstract reads like a (vague) real abstract of its topic.

Structure of the signal, coarse to fine:

- field terms, shared by all papers of a MAG field;
- topic terms, shared by the papers of one topic (6-8 topics per field);
- niche focus terms: a fixed handful of the topic's terms (plus a few field terms)
  that the papers of one niche (a small community inside a topic) repeat.

The citation generator in :mod:`mdcr.corpus.synth` cites mostly within the niche and
the topic, so citing and cited papers share words at every level.
"""

from __future__ import annotations

import hashlib
import random
import re
from dataclasses import dataclass

# MAG fields of study, as spelled in S2ORC (Appendix A.2 of the paper), with relative
# sizes: a rough picture of S2ORC's skew (Medicine largest; Art, Philosophy and History
# smallest, so their field-cited sets are the small ones, as in the paper).
FIELD_WEIGHTS: dict[str, float] = {
    "Medicine": 0.235,
    "Biology": 0.125,
    "Chemistry": 0.092,
    "Computer Science": 0.082,
    "Physics": 0.074,
    "Engineering": 0.060,
    "Materials Science": 0.050,
    "Psychology": 0.045,
    "Mathematics": 0.044,
    "Environmental Science": 0.032,
    "Business": 0.027,
    "Economics": 0.026,
    "Sociology": 0.020,
    "Political Science": 0.019,
    "Geology": 0.017,
    "Geography": 0.015,
    "History": 0.007,
    "Philosophy": 0.005,
    "Art": 0.004,
}
FIELDS: tuple[str, ...] = tuple(sorted(FIELD_WEIGHTS))

# Fields that often co-occur as a second MAG label (the first is the primary field).
RELATED_FIELDS: dict[str, tuple[str, ...]] = {
    "Art": ("History", "Philosophy", "Sociology"),
    "Biology": ("Medicine", "Chemistry", "Environmental Science"),
    "Business": ("Economics", "Sociology", "Computer Science"),
    "Chemistry": ("Materials Science", "Biology", "Physics"),
    "Computer Science": ("Mathematics", "Engineering", "Business"),
    "Economics": ("Business", "Political Science", "Mathematics"),
    "Engineering": ("Computer Science", "Materials Science", "Physics"),
    "Environmental Science": ("Biology", "Geography", "Chemistry"),
    "Geography": ("Environmental Science", "Geology", "Sociology"),
    "Geology": ("Geography", "Environmental Science", "Chemistry"),
    "History": ("Political Science", "Art", "Sociology"),
    "Materials Science": ("Chemistry", "Physics", "Engineering"),
    "Mathematics": ("Computer Science", "Physics", "Economics"),
    "Medicine": ("Biology", "Psychology", "Chemistry"),
    "Philosophy": ("Psychology", "History", "Political Science"),
    "Physics": ("Mathematics", "Materials Science", "Chemistry"),
    "Political Science": ("Economics", "Sociology", "History"),
    "Psychology": ("Medicine", "Sociology", "Biology"),
    "Sociology": ("Political Science", "Psychology", "Economics"),
}

# Field terms (real domain words, comma separated) and topics: name -> topic terms.
_VOCAB: dict[str, tuple[str, dict[str, str]]] = {
    "Medicine": (
        "patient, patients, clinical, treatment, therapy, diagnosis, disease, hospital, "
        "mortality, morbidity, symptoms, prognosis, cohort, randomized trial, placebo, dose, "
        "surgery, surgical, outcomes, risk factors, incidence, prevalence, chronic, acute, "
        "infection, inflammation, syndrome, lesion, biopsy, physicians, nursing, health care, "
        "adverse events, complications, follow-up, admission, intensive care, pathology, "
        "screening, drug, medication, blood pressure, serum, plasma, imaging, retrospective, "
        "prospective, efficacy, safety, comorbidity",
        {
            "Oncology": "tumor, cancer, chemotherapy, metastasis, carcinoma, radiotherapy, "
            "oncology, malignant, survival rate, tumour staging, breast cancer, lymph node",
            "Cardiology": "cardiac, heart failure, myocardial infarction, coronary artery, "
            "hypertension, atrial fibrillation, arrhythmia, stent, ventricular, angina, "
            "echocardiography, cholesterol",
            "Infectious Diseases": "bacterial, viral, antibiotic, vaccine, sepsis, pathogen, "
            "HIV, tuberculosis, antimicrobial resistance, influenza, pneumonia, epidemic",
            "Neurology": "stroke, neurological, seizure, epilepsy, dementia, Alzheimer disease, "
            "Parkinson disease, cognitive decline, brain injury, multiple sclerosis, migraine, "
            "neuropathy",
            "Endocrinology": "diabetes, insulin, glucose, obesity, metabolic syndrome, thyroid, "
            "glycemic control, insulin resistance, HbA1c, endocrine, adipose tissue, hormone",
            "Orthopedics": "fracture, bone, orthopedic, arthroplasty, joint, spine, cartilage, "
            "osteoporosis, implant, knee, hip, rehabilitation",
            "Pediatrics": "pregnancy, maternal, infant, neonatal, preterm birth, gestational, "
            "children, pediatric, breastfeeding, birth weight, obstetric, fetal",
        },
    ),
    "Biology": (
        "cell, cells, gene, genes, protein, proteins, expression, species, genome, DNA, RNA, "
        "enzyme, membrane, mutation, molecular, sequence, organism, tissue, receptor, "
        "signaling, pathway, mechanism, function, regulation, evolution, population, "
        "phenotype, genotype, transcription, in vitro, in vivo, mice, strain, culture, "
        "biological, binding, activity, development, growth, metabolism, assay, microscopy, "
        "genetic, variation",
        {
            "Genomics": "sequencing, transcriptome, gene regulation, chromatin, methylation, "
            "epigenetic, genome-wide, SNP, alleles, RNA-seq, CRISPR, bioinformatics",
            "Cell Biology": "mitochondria, apoptosis, cytoskeleton, cell cycle, autophagy, "
            "organelle, vesicle, nucleus, cell division, stem cells, differentiation, "
            "proliferation",
            "Ecology": "ecosystem, habitat, biodiversity, predator, prey, community ecology, "
            "species richness, foraging, conservation, invasive species, pollination, abundance",
            "Microbiology": "bacteria, microbial, microbiome, pathogenic, biofilm, virulence, "
            "Escherichia coli, fungal, yeast, bacteriophage, gut microbiota, colonization",
            "Neuroscience": "neurons, synaptic, cortex, neural circuits, hippocampus, "
            "neurotransmitter, axon, dendritic, plasticity, action potential, glial, "
            "memory formation",
            "Plant Biology": "plant, leaf, root, photosynthesis, seedlings, chloroplast, "
            "Arabidopsis, drought stress, flowering, crop, seed germination, plant hormones",
            "Immunology": "immune response, T cells, antibody, cytokine, antigen, macrophage, "
            "lymphocyte, innate immunity, B cells, interleukin, immune cells, vaccination",
            "Evolutionary Biology": "phylogenetic, natural selection, adaptation, speciation, "
            "lineage, divergence, ancestral, fitness, mutation rate, evolutionary history, "
            "phylogeny, clade",
        },
    ),
    "Chemistry": (
        "synthesis, reaction, compound, compounds, molecule, catalyst, solvent, solution, "
        "structure, spectroscopy, bond, ligand, complex, crystal, temperature, concentration, "
        "yield, acid, oxidation, reduction, aqueous, organic, inorganic, NMR, X-ray "
        "diffraction, characterization, derivatives, kinetics, equilibrium, electron, ions, "
        "metal, atoms, chemical, properties, stability, selectivity, reagent, functional "
        "groups, polymer, adsorption, molecular",
        {
            "Organic Synthesis": "total synthesis, stereoselective, enantioselective, "
            "alkylation, cross-coupling, palladium, cyclization, natural product, asymmetric, "
            "amine, ketone, aldehyde",
            "Catalysis": "catalytic activity, heterogeneous catalysis, turnover, zeolite, "
            "hydrogenation, photocatalyst, active sites, catalyst support, platinum, "
            "dehydrogenation, oxidation reaction, conversion",
            "Electrochemistry": "electrode, electrochemical, redox, voltammetry, electrolyte, "
            "current density, oxygen reduction, battery, lithium, anode, cathode, impedance",
            "Analytical Chemistry": "chromatography, mass spectrometry, detection limit, HPLC, "
            "sensor, calibration, quantification, fluorescence, trace analysis, sample "
            "preparation, extraction, analyte",
            "Computational Chemistry": "density functional theory, DFT, quantum chemical, "
            "ab initio, molecular dynamics, potential energy surface, excited states, "
            "hydrogen bonding, vibrational, thermodynamic, computational, orbital",
            "Polymer Chemistry": "polymerization, copolymer, monomer, polymer chains, molecular "
            "weight, hydrogel, crosslinking, block copolymer, glass transition, viscosity, "
            "polyethylene, nanocomposite",
            "Coordination Chemistry": "coordination, metal complexes, ligands, copper, iron, "
            "crystal structure, magnetic properties, luminescence, lanthanide, transition "
            "metal, chelating, octahedral",
        },
    ),
    "Computer Science": (
        "algorithm, algorithms, data, system, systems, network, networks, performance, "
        "computation, software, model, models, learning, framework, architecture, "
        "implementation, efficient, accuracy, dataset, datasets, experiments, benchmark, "
        "evaluation, optimization, complexity, scalability, processing, applications, users, "
        "memory, computing, parallel, distributed, security, information, design, protocol, "
        "hardware, simulation, training, prediction, classification, graph, query, database",
        {
            "Machine Learning": "neural network, deep learning, training data, classifier, "
            "supervised learning, reinforcement learning, gradient descent, convolutional, "
            "feature extraction, generalization, overfitting, embeddings",
            "Natural Language Processing": "natural language, language model, text, corpus, "
            "word embeddings, machine translation, parsing, sentiment analysis, named entity, "
            "question answering, tokens, semantic",
            "Computer Vision": "image, images, object detection, segmentation, video, pixel, "
            "visual recognition, camera, face recognition, image classification, scene, "
            "convolutional features",
            "Networking": "wireless, routing, bandwidth, latency, packet, throughput, sensor "
            "networks, mobile, 5G, protocol stack, congestion, Internet",
            "Security": "encryption, attack, cryptographic, authentication, privacy, malware, "
            "vulnerability, intrusion detection, blockchain, access control, adversary, secure",
            "Data Mining": "query processing, indexing, data mining, clustering, transactions, "
            "relational, big data, storage, recommender, association rules, SQL, "
            "data warehouse",
            "Theory of Computation": "computational complexity, NP-hard, approximation "
            "algorithm, polynomial time, graph theory, combinatorial, lower bound, "
            "decidability, automata, formal verification, randomized algorithm, upper bound",
            "Distributed Systems": "cloud computing, scheduling, virtualization, fault "
            "tolerance, consensus, load balancing, cluster, data center, edge computing, "
            "microservices, replication, energy consumption",
        },
    ),
    "Physics": (
        "energy, field, magnetic, quantum, particle, particles, mass, spin, temperature, "
        "phase, wave, electron, electrons, photon, measurement, theory, theoretical, "
        "experimental, spectrum, frequency, scattering, interaction, dynamics, symmetry, "
        "momentum, states, density, laser, optical, beam, detector, radiation, calculations, "
        "lattice, transition, collisions, decay, coupling, excitation, resonance, velocity, "
        "force, Hamiltonian, perturbation",
        {
            "Particle Physics": "quark, gluon, hadron, neutrino, Higgs boson, LHC, cross "
            "section, standard model, collider, lepton, gauge theory, QCD",
            "Condensed Matter": "superconductivity, superconducting, topological, band "
            "structure, Fermi surface, magnetism, phonon, graphene, thin films, electronic "
            "structure, semiconductor, correlated electrons",
            "Astrophysics": "galaxy, galaxies, stars, stellar, black hole, cosmic, dark matter, "
            "cosmological, supernova, telescope, redshift, gravitational waves",
            "Quantum Information": "entanglement, qubit, quantum information, quantum "
            "computing, photonic, coherence, decoherence, cavity, quantum state, squeezed "
            "light, single photon, interferometer",
            "Plasma and Fluids": "plasma, turbulence, fluid, flow, vortex, Reynolds number, "
            "tokamak, magnetohydrodynamic, shock wave, viscous, instability, convection",
            "Nuclear Physics": "nuclei, nuclear, isotopes, fission, fusion, neutron, proton, "
            "nuclear reactions, binding energy, shell model, gamma rays, radioactive",
            "Optics": "laser pulses, femtosecond, nonlinear optics, refractive index, "
            "waveguide, optical fiber, diffraction, polarization, photonic crystal, "
            "wavelength, ultrafast, optical spectroscopy",
        },
    ),
    "Engineering": (
        "design, control, performance, structural, mechanical, electrical, power, "
        "efficiency, load, stress, simulation, finite element, prototype, testing, "
        "experimental, parameters, optimization, reliability, manufacturing, sensor, device, "
        "circuit, voltage, signal, frequency, vibration, heat transfer, thermal, pressure, "
        "numerical, measurement, operation, construction, components, failure, fatigue, "
        "strength, robustness, cost, system, systems",
        {
            "Control Systems": "controller, feedback, PID, stability analysis, robust control, "
            "nonlinear control, actuator, state estimation, Kalman filter, trajectory "
            "tracking, model predictive control, disturbance",
            "Power Systems": "power grid, renewable energy, wind turbine, photovoltaic, "
            "inverter, smart grid, transmission line, electric vehicle, power converter, "
            "distribution network, load forecasting, solar",
            "Structural Engineering": "concrete, steel, beam, seismic, bridge, reinforced "
            "concrete, building, soil, foundation, earthquake, structural health monitoring, "
            "masonry",
            "Mechanical Engineering": "combustion, engine, turbine, heat exchanger, cooling, "
            "friction, gear, fuel, thermal efficiency, bearing, compressor, internal "
            "combustion",
            "Signal Processing": "signal processing, filter, antenna, modulation, noise, "
            "radar, channel estimation, sampling, spectral, wavelet, receiver, transmitter",
            "Robotics": "robot, robotic, manipulator, autonomous, navigation, kinematics, "
            "motion planning, unmanned aerial vehicle, mobile robot, grasping, localization, "
            "obstacle avoidance",
        },
    ),
    "Materials Science": (
        "material, materials, microstructure, alloy, alloys, thin film, films, composite, "
        "composites, surface, morphology, grain, crystal structure, mechanical properties, "
        "hardness, tensile strength, annealing, deposition, SEM, TEM, XRD, porosity, "
        "substrate, interface, coating, fabrication, processing, doping, defects, "
        "characterization, conductivity, optical properties, ceramic, oxide, particle size, "
        "sintering, corrosion, elastic modulus, fracture, nanostructures, synthesized",
        {
            "Nanomaterials": "nanoparticles, nanowires, carbon nanotubes, graphene oxide, "
            "quantum dots, nanocrystals, nanoscale, surface area, colloidal, nanostructured, "
            "self-assembly, nanocomposites",
            "Metallurgy": "steel, aluminum alloy, titanium, welding, heat treatment, "
            "precipitation, dislocation, plastic deformation, grain boundaries, creep, "
            "martensite, casting",
            "Energy Materials": "solar cells, perovskite, lithium-ion battery, electrode "
            "materials, supercapacitor, thermoelectric, fuel cell, photovoltaic, energy "
            "storage, charge transport, power conversion, cathode materials",
            "Ceramics": "ceramics, glass, dielectric, piezoelectric, ferroelectric, sintering "
            "temperature, zirconia, alumina, glass transition, densification, perovskite "
            "oxide, thermal shock",
            "Biomaterials": "biomaterials, scaffold, biocompatibility, hydrogel, polymer "
            "composite, tissue engineering, biodegradable, fibers, electrospinning, "
            "mechanical strength, implants, drug delivery",
            "Coatings": "corrosion resistance, protective coating, high temperature oxidation, "
            "protective layer, electrochemical impedance, passivation, wear resistance, "
            "surface treatment, adhesion, plasma spraying, galvanic, tribology",
        },
    ),
    "Mathematics": (
        "theorem, proof, equation, equations, function, functions, space, spaces, operator, "
        "algebra, algebraic, group, groups, bounded, solution, solutions, existence, "
        "uniqueness, convergence, estimate, estimates, inequality, problem, class, finite, "
        "infinite, dimension, dimensional, structure, condition, conditions, numerical, "
        "linear, nonlinear, matrix, polynomial, integer, sequence, generalization, "
        "characterization, invariant, lemma, corollary",
        {
            "Partial Differential Equations": "partial differential equations, boundary value "
            "problem, elliptic, parabolic, Sobolev spaces, weak solutions, Navier-Stokes, "
            "regularity, Dirichlet problem, blow-up, nonlinear Schrödinger, global existence",
            "Algebra": "commutative ring, modules, ideals, Lie algebra, representation theory, "
            "homomorphism, Galois, field extension, group actions, finite groups, algebraic "
            "structures, category",
            "Geometry and Topology": "manifold, manifolds, topology, curvature, Riemannian, "
            "homotopy, cohomology, geodesic, surfaces, knot, symplectic, embedding",
            "Probability": "random variables, probability, stochastic processes, Brownian "
            "motion, martingale, limit theorem, distribution, Markov chain, estimator, "
            "asymptotic, variance, large deviations",
            "Number Theory and Combinatorics": "prime numbers, Diophantine, modular forms, "
            "combinatorics, graph coloring, permutations, partitions, generating function, "
            "integers, lattice points, zeta function, congruence",
            "Numerical Analysis": "numerical method, discretization, finite difference, "
            "iterative method, optimization problem, convex, error analysis, approximation, "
            "numerical stability, interpolation, eigenvalue, quadrature",
            "Dynamical Systems": "dynamical systems, bifurcation, chaos, periodic solutions, "
            "attractor, Lyapunov, ergodic, fixed point, oscillation, delay differential "
            "equations, invariant manifolds, stability",
        },
    ),
    "Psychology": (
        "participants, behavior, behavioral, cognitive, emotional, social, experiment, "
        "questionnaire, scale, self-report, individuals, personality, perception, attention, "
        "memory, motivation, anxiety, depression, stress, adolescents, adults, gender, age, "
        "mental health, psychological, intervention, measures, assessment, reliability, "
        "validity, correlation, regression, responses, effect, task, relationships, coping, "
        "symptoms, emotions, wellbeing",
        {
            "Clinical Psychology": "depressive symptoms, anxiety disorders, PTSD, "
            "psychotherapy, cognitive behavioral therapy, trauma, suicide, schizophrenia, "
            "eating disorders, substance use, psychiatric, treatment outcomes",
            "Cognitive Psychology": "working memory, executive function, reaction time, "
            "attentional, decision making, reasoning, visual perception, language processing, "
            "recall, categorization, cognitive load, inhibition",
            "Developmental Psychology": "infants, childhood, parenting, attachment, "
            "adolescence, early childhood, peer relationships, language development, school "
            "readiness, temperament, developmental trajectories, caregivers",
            "Social Psychology": "attitudes, stereotypes, prejudice, social identity, "
            "persuasion, self-esteem, group processes, interpersonal, social influence, "
            "empathy, prosocial behavior, intergroup",
            "Health Psychology": "job satisfaction, burnout, employees, workplace, physical "
            "activity, health behavior, sleep, stress management, occupational, resilience, "
            "health promotion, quality of life",
            "Cognitive Neuroscience": "fMRI, brain activity, EEG, neural correlates, "
            "prefrontal cortex, amygdala, event-related potentials, neuroimaging, reward "
            "processing, emotion regulation, brain regions, cognitive control",
        },
    ),
    "Environmental Science": (
        "environmental, pollution, water, soil, climate, climate change, emissions, "
        "ecosystem, sampling, sites, concentrations, contamination, sustainability, "
        "environment, monitoring, land use, regional, impact, impacts, management, exposure, "
        "waste, heavy metals, groundwater, river, sediment, air quality, atmospheric, "
        "seasonal, spatial, temporal, variability, anthropogenic, risk, toxicity, vegetation, "
        "agricultural, carbon, nitrogen, precipitation",
        {
            "Water Quality": "wastewater, water treatment, nitrate, phosphorus, "
            "eutrophication, drinking water, lake, effluent, dissolved oxygen, surface water, "
            "pollutants, removal efficiency",
            "Air Pollution": "PM2.5, particulate matter, ozone, aerosol, air pollutants, urban "
            "air, emission inventory, nitrogen dioxide, haze, traffic emissions, indoor air, "
            "source apportionment",
            "Climate Change": "greenhouse gas, global warming, carbon dioxide, carbon "
            "sequestration, climate models, temperature rise, drought, mitigation, "
            "adaptation, CO2 emissions, warming scenarios, extreme events",
            "Soil Contamination": "soil contamination, cadmium, lead, arsenic, "
            "bioremediation, biochar, microplastics, pesticides, soil organic carbon, "
            "leaching, heavy metal pollution, remediation",
            "Waste Management": "solid waste, recycling, composting, landfill, life cycle "
            "assessment, biogas, anaerobic digestion, waste management, circular economy, "
            "bioenergy, municipal waste, incineration",
            "Land and Ecosystems": "land cover, deforestation, wetlands, ecosystem services, "
            "forest, watershed, biodiversity loss, remote sensing, land degradation, "
            "restoration, protected areas, urbanization",
        },
    ),
    "Business": (
        "firms, firm, management, companies, market, marketing, consumers, customers, "
        "business, strategy, strategic, organizational, employees, innovation, competitive, "
        "industry, value, investment, financial, survey, managers, corporate, brand, "
        "products, services, supply chain, stakeholders, entrepreneurship, empirical, "
        "factors, sector, enterprises, decision, capabilities, practices, quality, "
        "satisfaction, loyalty, profitability, performance",
        {
            "Marketing": "advertising, brand loyalty, consumer behavior, purchase intention, "
            "social media marketing, customer satisfaction, pricing, retail, word of mouth, "
            "brand equity, online shopping, customer engagement",
            "Accounting and Finance": "stock returns, corporate governance, earnings "
            "management, accounting, auditing, capital structure, dividends, investors, "
            "disclosure, financial reporting, firm value, banks",
            "Operations Management": "supply chain management, inventory, logistics, lean "
            "manufacturing, procurement, operations management, suppliers, production "
            "planning, quality management, distribution, lead time, demand forecasting",
            "Strategy and Innovation": "competitive advantage, dynamic capabilities, "
            "innovation performance, R&D, alliances, knowledge management, technology "
            "adoption, business model, absorptive capacity, diversification, mergers, "
            "acquisitions",
            "Human Resource Management": "human resource management, leadership style, "
            "organizational commitment, job performance, employee engagement, turnover "
            "intention, training programs, organizational culture, teams, work engagement, "
            "compensation, employee motivation",
            "Entrepreneurship": "small and medium enterprises, SMEs, startups, entrepreneurs, "
            "venture capital, family business, entrepreneurial orientation, new ventures, "
            "business performance, internationalization, self-employment, opportunity "
            "recognition",
        },
    ),
    "Economics": (
        "economic, economy, market, markets, prices, policy, policies, income, trade, labor, "
        "demand, supply, welfare, equilibrium, empirical, estimates, evidence, panel data, "
        "countries, government, investment, tax, inflation, unemployment, wages, households, "
        "consumption, costs, elasticity, regression, monetary, fiscal, productivity, capital, "
        "financial, development, inequality, economic growth",
        {
            "Macroeconomics": "monetary policy, interest rates, central bank, business cycle, "
            "GDP, inflation targeting, fiscal policy, exchange rate, recession, output gap, "
            "DSGE, public debt",
            "Labor Economics": "labor market, minimum wage, employment, human capital, "
            "returns to education, wage gap, job search, migration, labor supply, unions, "
            "earnings, skills",
            "Development Economics": "poverty, developing countries, microfinance, foreign "
            "aid, rural households, agricultural productivity, institutions, economic "
            "development, remittances, Africa, India, China",
            "International Trade": "international trade, tariffs, exports, imports, trade "
            "agreements, foreign direct investment, globalization, comparative advantage, "
            "exchange rates, trade liberalization, global value chains, protectionism",
            "Financial Economics": "asset pricing, stock market, volatility, portfolio, risk "
            "premium, bonds, financial crisis, banking, credit, liquidity, market "
            "efficiency, returns",
            "Energy Economics": "energy prices, carbon tax, environmental regulation, oil "
            "prices, renewable energy, emissions trading, natural resources, externalities, "
            "energy consumption, sustainable development, environmental Kuznets curve, "
            "green growth",
            "Game Theory": "game theory, auctions, mechanism design, contracts, incentives, "
            "asymmetric information, bargaining, Nash equilibrium, behavioral economics, "
            "preferences, utility, experimental economics",
        },
    ),
    "Sociology": (
        "social, society, community, communities, gender, women, family, families, class, "
        "inequality, race, ethnic, culture, cultural, identity, qualitative, interviews, "
        "survey, youth, education, work, relationships, networks, norms, institutions, "
        "power, migration, urban, rural, religion, social capital, discourse, everyday "
        "life, practices, experiences, structural, groups, status, ethnography",
        {
            "Gender and Family": "gender roles, motherhood, fathers, marriage, divorce, "
            "domestic violence, household labor, sexuality, feminist, care work, gender "
            "equality, childcare",
            "Race and Migration": "racism, immigrants, ethnicity, discrimination, refugees, "
            "integration, minority groups, diaspora, citizenship, racial inequality, "
            "assimilation, segregation",
            "Education and Stratification": "educational attainment, social mobility, "
            "schools, students, teachers, socioeconomic status, higher education, inequality "
            "of opportunity, class reproduction, academic achievement, tracking, meritocracy",
            "Health and Aging": "health inequalities, aging, older adults, social support, "
            "loneliness, caregiving, retirement, life course, wellbeing, disability, "
            "mortality, health behaviors",
            "Crime and Deviance": "crime, criminal justice, policing, incarceration, prison, "
            "deviance, violence, juvenile delinquency, victimization, drug use, punishment, "
            "offenders",
            "Media and Digital Society": "social media, internet use, digital divide, online "
            "communities, media representation, youth culture, consumption, popular culture, "
            "news media, virtual, technology use, communication",
        },
    ),
    "Political Science": (
        "political, politics, government, state, states, policy, democracy, democratic, "
        "elections, electoral, voters, parties, power, institutions, institutional, public, "
        "citizens, governance, legislation, law, rights, conflict, international, national, "
        "security, regime, authority, civil society, participation, representation, public "
        "opinion, ideology, reform, sovereignty, legitimacy, countries, war, peace, "
        "cooperation, constitution",
        {
            "Elections and Voting": "voter turnout, electoral systems, campaigns, candidates, "
            "partisanship, polarization, populism, ballots, proportional representation, "
            "swing voters, vote choice, incumbents",
            "International Relations": "foreign policy, diplomacy, alliances, great powers, "
            "international organizations, United Nations, sanctions, nuclear weapons, "
            "hegemony, realism, multilateralism, treaties",
            "Conflict and Security": "civil war, terrorism, insurgency, military, armed "
            "conflict, peacekeeping, political violence, rebels, counterterrorism, ethnic "
            "conflict, security forces, ceasefire",
            "Public Administration": "public administration, bureaucracy, policy "
            "implementation, public services, welfare state, decentralization, local "
            "government, accountability, public management, regulation, budget, agencies",
            "Comparative Politics": "authoritarian, democratization, autocracy, political "
            "regimes, regime transition, corruption, clientelism, coups, federalism, "
            "post-communist, hybrid regimes, parliaments",
            "European Politics": "European Union, European integration, member states, "
            "Brexit, European Commission, Euroscepticism, EU law, enlargement, European "
            "Parliament, supranational, eurozone, European Council",
        },
    ),
    "Geology": (
        "rocks, rock, sedimentary, basin, formation, tectonic, deposits, geological, "
        "minerals, mineral, crust, mantle, fault, faults, strata, outcrop, geochemical, "
        "isotopic, dating, Cretaceous, Jurassic, Paleozoic, Cenozoic, Miocene, sediments, "
        "magma, volcanic, metamorphic, granite, basalt, uplift, erosion, stratigraphy, "
        "geochemistry, zircon, petrology, composition, isotopes, lithosphere",
        {
            "Tectonics": "plate tectonics, subduction, orogeny, fault zone, rifting, "
            "deformation, thrust, continental collision, continental margin, shear zone, "
            "exhumation, fault kinematics",
            "Volcanology": "volcanic eruption, magma chamber, lava, igneous rocks, volcano, "
            "pyroclastic, basaltic magma, crystallization, melt inclusions, eruption "
            "dynamics, tephra, arc magmatism",
            "Sedimentology": "depositional environment, fluvial, carbonate, fossils, "
            "paleoclimate, sea level, sandstone, facies, paleontology, marine sediments, "
            "limestone, shale",
            "Geochronology": "U-Pb dating, zircon ages, trace elements, rare earth elements, "
            "Sr isotopes, geochronology, radiogenic, isotope ratios, whole-rock geochemistry, "
            "mineral chemistry, oxygen isotopes, Hf isotopes",
            "Economic Geology": "ore deposits, hydrothermal, gold mineralization, copper, "
            "hydrocarbon, petroleum, reservoir, source rocks, oil and gas, fluid inclusions, "
            "mineralization, exploration",
            "Seismology": "earthquakes, seismic waves, seismicity, seismic hazard, "
            "geophysical, gravity anomalies, magnetotelluric, tomography, ground motion, "
            "aftershocks, crustal structure, seismometers",
        },
    ),
    "Geography": (
        "spatial, regional, region, regions, urban, rural, land use, landscape, population, "
        "places, place, territory, mapping, GIS, remote sensing, spatial analysis, "
        "settlement, cities, city, planning, local, global, migration, mobility, geographic, "
        "geographical, distribution, patterns, areas, scale, resources, tourism, community, "
        "space, boundaries, accessibility, infrastructure, transport, census, coastal",
        {
            "Urban Geography": "urbanization, urban planning, gentrification, housing, urban "
            "sprawl, neighborhoods, public space, smart cities, metropolitan, informal "
            "settlements, urban growth, suburbs",
            "Hydrology": "hydrology, river basin, floods, runoff, watershed, glacier, "
            "geomorphology, rainfall, catchment, streamflow, landslides, snow cover",
            "Tourism": "tourists, tourism development, destinations, heritage, visitors, "
            "ecotourism, hospitality, tourist satisfaction, cultural tourism, travel, "
            "resorts, destination image",
            "Transport Geography": "transportation, commuting, public transport, travel "
            "behavior, road network, traffic, cycling, walking, mobility patterns, transit, "
            "car ownership, travel time",
            "Geographic Information Science": "satellite imagery, land cover classification, "
            "Landsat, spatial data, geostatistics, digital elevation model, NDVI, change "
            "detection, geospatial, spatial resolution, mapping accuracy, kriging",
            "Human Geography": "borders, geopolitics, territoriality, rural development, "
            "livelihoods, agrarian change, indigenous, place identity, migration flows, "
            "regional development, displacement, land tenure",
        },
    ),
    "History": (
        "history, historical, century, period, war, empire, colonial, archives, documents, "
        "sources, political, social, cultural, religious, church, state, kingdom, nineteenth "
        "century, eighteenth century, twentieth century, medieval, modern, ancient, early "
        "modern, revolution, society, elite, trade, merchants, nation, national identity, "
        "memory, narrative, historiography, biography, letters, manuscripts, tradition, "
        "reform, administration, Europe, Britain",
        {
            "Medieval History": "monastery, feudal, crusades, knights, charters, Byzantine, "
            "clergy, medieval manuscripts, saints, bishops, chronicles, monks",
            "Colonial History": "colonialism, colonies, imperial, indigenous peoples, "
            "missionaries, slavery, plantation, decolonization, British Empire, colonial "
            "administration, settlers, colonial rule",
            "Military History": "World War, First World War, Second World War, Cold War, "
            "military history, soldiers, nationalism, Nazi Germany, Soviet Union, "
            "revolutionaries, propaganda, diplomacy",
            "Economic and Social History": "economic history, industrialization, labor "
            "movement, workers, trade networks, agriculture, peasants, urban history, "
            "guilds, commerce, capitalism, markets",
            "Ancient History": "ancient Greece, Roman, antiquity, classical, inscriptions, "
            "archaeology, Egypt, Athens, Rome, emperors, pottery, temples",
            "Intellectual History": "Enlightenment, intellectual history, print culture, "
            "history of science, Renaissance, humanism, literacy, book history, public "
            "sphere, ideas, Reformation, scholars",
        },
    ),
    "Philosophy": (
        "philosophy, philosophical, argument, arguments, theory, concept, concepts, account, "
        "view, views, claim, claims, knowledge, truth, reason, reasoning, mind, meaning, "
        "nature, ethics, ethical, moral, morality, freedom, existence, language, logic, "
        "metaphysics, epistemology, ontology, interpretation, thought, notion, objection, "
        "justification, experience, normative, principle, principles, understanding, critique",
        {
            "Ethics": "moral responsibility, virtue ethics, consequentialism, deontology, "
            "moral realism, duties, bioethics, justice, autonomy, moral status, moral luck, "
            "obligation",
            "Philosophy of Mind": "consciousness, mental states, intentionality, qualia, "
            "physicalism, perception, phenomenal, mind-body problem, cognition, mental "
            "representation, self-awareness, embodiment",
            "Epistemology": "justified belief, skepticism, testimony, evidence, rationality, "
            "epistemic, knowledge claims, belief, inference, certainty, disagreement, "
            "induction",
            "Philosophy of Language": "semantics, reference, propositions, truth conditions, "
            "modal logic, vagueness, paradox, logical consequence, quantifiers, predicate, "
            "possible worlds, linguistic meaning",
            "History of Philosophy": "Kant, Hegel, Aristotle, Plato, Heidegger, Nietzsche, "
            "Descartes, phenomenology, Husserl, ancient philosophy, German idealism, "
            "existentialism",
            "Political Philosophy": "liberalism, social contract, political legitimacy, "
            "rights, equality, distributive justice, Rawls, republicanism, toleration, "
            "sovereignty, civic virtue, public reason",
        },
    ),
    "Art": (
        "art, artistic, artists, artist, painting, paintings, aesthetic, aesthetics, visual, "
        "style, works, exhibition, museum, gallery, culture, cultural, creative, creativity, "
        "image, representation, form, tradition, contemporary, modern, medium, audience, "
        "performance, music, musical, composer, theatre, dance, film, cinema, practice, "
        "collection, sculpture, drawing, portrait, craft",
        {
            "Visual Art": "painters, canvas, oil painting, color, landscape painting, "
            "portraiture, modernism, impressionism, abstract art, brushwork, iconography, "
            "frescoes",
            "Music": "music performance, composers, melody, harmony, rhythm, orchestra, "
            "opera, songs, musicians, jazz, music education, instruments",
            "Film and Media Art": "films, filmmakers, cinema history, documentary, screen, "
            "narrative film, digital media, photography, video art, television, animation, "
            "spectators",
            "Architecture and Design": "architecture, architects, buildings, design practice, "
            "ornament, urban design, interior, architectural history, graphic design, "
            "typography, furniture, modernist architecture",
            "Performing Arts": "theatre performance, actors, stage, choreography, dancers, "
            "drama, playwrights, performance art, rehearsal, theatrical, audiences, "
            "dramaturgy",
            "Art Institutions": "art education, curators, museum collections, art market, "
            "exhibitions, art criticism, cultural heritage, conservation, arts policy, "
            "cultural institutions, visitors, patronage",
        },
    ),
}

# Generic academic vocabulary (shared by every field; BM25's IDF discounts it).
_GENERIC = {
    "a": "novel, new, robust, efficient, significant, comprehensive, systematic, simple, "
    "general, effective, important, potential, improved, alternative, detailed, "
    "quantitative, empirical, theoretical, practical, recent, critical, complex, "
    "fundamental, specific, consistent, reliable, flexible, integrated, comparative",
    "m": "approach, method, framework, model, analysis, technique, strategy, procedure, "
    "study, investigation, scheme, methodology, formulation, tool, design, assessment",
    "r": "effect, role, impact, relationship, influence, contribution, mechanism, pattern, "
    "importance, significance, function, interplay, association, dependence",
    "v": "investigate, examine, analyze, study, propose, present, develop, evaluate, "
    "describe, explore, assess, compare, introduce, characterize, report, discuss, review, "
    "identify, test, quantify",
    "vs": "investigates, examines, analyzes, studies, proposes, presents, develops, "
    "evaluates, describes, explores, assesses, compares, introduces, characterizes, reviews",
    "ps": "was analyzed, was measured, was performed, was assessed, was estimated, was "
    "conducted, was validated, was applied, was tested, was calibrated",
    "pp": "were analyzed, were measured, were collected, were compared, were evaluated, were "
    "examined, were modeled, were recorded, were quantified, were identified",
    "o": "improves, increases, reduces, affects, predicts, enhances, influences, determines, "
    "explains, modulates, strengthens, limits",
}

# Sentence templates by abstract section. Slots: {t} topic-level term, {f} field-level
# term, {a}/{m}/{r}/{v}/{vs}/{ps}/{pp}/{o} generic words (see _GENERIC), {n} a number.
_SECTIONS: tuple[tuple[str, ...], ...] = (
    (  # background
        "{t} is an important topic in {f} and has received considerable attention in recent "
        "years, especially in studies of {t} and {f}.",
        "Recent advances in {t} and {t} have led to {a} insights into {f}, but many questions "
        "about {t} remain open.",
        "Despite extensive research on {t}, the {r} of {t} in {f} remains poorly understood, "
        "in particular for {f}.",
        "{t} plays a key role in {f}, particularly in the context of {t} and {t}.",
        "Understanding the relationship between {t} and {t} is a central problem in {f} "
        "with direct consequences for {f}.",
        "Previous studies of {t} have focused mainly on {f} and {f}, and the {r} of {t} has "
        "received less attention.",
        "There is growing interest in {t} and its {r} on {f}, driven by new work on {t}.",
        "{t} and {t} are widely studied in {f}, yet their {r} on {f} is still debated.",
    ),
    (  # objective
        "In this {m}, we {v} the {r} of {t} on {t} and discuss its relevance for {f}.",
        "Here we {v} a {a} {m} for {t} based on {t} and {f}.",
        "The aim of this {m} was to {v} the {r} between {t} and {f} in the setting of {t}.",
        "This paper {vs} the {r} of {t} in {f} using {a} data on {t} and {f}.",
        "We {v} whether {t} {o} {t} in {f}, and how this depends on {t}.",
        "To address this problem, we {v} a {a} {m} that combines {t} with {t} and {f}.",
    ),
    (  # methods
        "Data on {t} and {f} {pp} from {n} cases, and {t} {ps} with a {a} {m}.",
        "A total of {n} {f} records {pp} using a {a} {m} that accounts for {t} and {f}.",
        "The {m} {ps} on {t} and {t}, using {a} measures of {f} and {f}.",
        "We used a {a} {m} to quantify {t}, {t} and {f} under controlled conditions.",
        "{t} {ps} in relation to {t}, {f} and {f}, with {t} as a secondary outcome.",
        "Our {m} relies on {t} and a {a} {m} of {f}, which we apply to {t}.",
        "Using {t} and {t}, we {v} {f} across {n} settings and compare it with {f}.",
        "The {m} {ps} against {a} baselines for {t}, including recent work on {f}.",
    ),
    (  # results
        "The results show that {t} significantly {o} {t}, while {f} has only a minor {r} on {t}.",
        "We found that {t} {o} {f} by {n} percent compared with {f}, in line with earlier "
        "work on {t}.",
        "{t} was strongly associated with {t} and {f}, and this association was robust to "
        "differences in {f}.",
        "Our {m} outperforms {a} alternatives on {t} and {t}, especially for {f}.",
        "Significant differences in {t} were observed between {f} and {t}, but not for {t}.",
        "These findings reveal a {a} {r} between {t} and {f} that was not reported for {t}.",
        "The proposed {m} achieves {a} results on {t} while reducing {f} and {f}.",
        "In addition, {t} {o} the {r} of {f} in {n} of the cases, mainly through {t}.",
    ),
    (  # conclusion
        "These results suggest that {t} is a {a} factor in {f} and should be taken into "
        "account in work on {t}.",
        "Our findings provide new evidence on {t} and have implications for {f} and {t}.",
        "We conclude that {t} and {t} should be considered in future studies of {f}.",
        "This {m} offers a {a} basis for understanding {t} in {f} and for further work on {t}.",
        "Further research is needed to clarify the {r} of {t} in {t} and in {f}.",
        "Overall, the {m} {o} our understanding of {t} and {f} and opens new directions for {t}.",
    ),
)

_TITLES: tuple[str, ...] = (
    "A {a} {m} for {t} in {f}",
    "The {r} of {t} on {t} in {f}",
    "{t} and {t}: a {a} {m}",
    "On the {r} of {t} in {f}",
    "{t} in {f}: evidence from {t}",
    "Effects of {t} on {f} and {t}",
    "Toward a {a} {m} of {t} for {f}",
    "A {a} {m} of {t} and {t} in {f}",
    "{t} as a determinant of {t} in {f}",
    "Investigating {t} and {f} with {t}",
    "New insights into {t} and {t}",
    "{t}, {t} and {f}: a {a} {m}",
)

# Short abstract strings (fail the 30-character rule), as seen in scraped metadata.
SHORT_ABSTRACTS: tuple[str, ...] = (
    "",
    "Abstract",
    "No abstract available.",
    "Not applicable.",
    "Editorial.",
    "Summary",
    "[Abstract not available]",
    "See full text.",
)


def _words(text: str) -> tuple[str, ...]:
    """Whitespace-separated words, duplicates removed, order kept."""
    return tuple(dict.fromkeys(text.split()))


# Modifiers of niche key phrases ("adaptive chemotherapy"): real, domain-neutral words.
MODIFIERS: tuple[str, ...] = _words(
    "adaptive hierarchical sparse coastal alpine urban rural pediatric geriatric maternal "
    "thermal acoustic seasonal nocturnal hybrid modular dynamic static stochastic deterministic "
    "spatial temporal longitudinal transient chronic acute early late residual latent "
    "distributed local global regional national multilevel multiscale nonlinear linear discrete "
    "continuous recursive iterative parallel sequential integrated targeted selective extended "
    "compact dense porous layered anisotropic isotropic symmetric asymmetric periodic random "
    "structured unstructured bounded weighted normalized conditional joint marginal robust "
    "resilient fragile stable unstable reversible irreversible passive active intrinsic "
    "extrinsic endogenous exogenous primary secondary tertiary central peripheral proximal "
    "distal lateral vertical horizontal internal external interactive collaborative competitive "
    "cooperative informal formal digital analog virtual physical mobile portable remote "
    "automated manual genetic hereditary congenital tropical arctic marine freshwater "
    "terrestrial volcanic oceanic atmospheric subsurface underground suburban metropolitan "
    "municipal domestic industrial agricultural commercial residential clinical experimental "
    "observational synthetic natural organic inorganic hydrated frozen molten crystalline "
    "amorphous granular fibrous elastic rigid flexible lightweight miniature large-scale "
    "small-scale low-cost high-resolution low-dose high-dose short-term long-term real-time "
    "multimodal multivariate bivariate ordinal categorical nested mixed cross-sectional "
    "comparative contextual historical contemporary traditional emerging novel conventional "
    "alternative sustainable renewable recycled fluorescent magnetic optical electrical "
    "mechanical chemical biological social economic cultural political legal ethical cognitive "
    "emotional sensory motor verbal visual auditory tactile spectral harmonic topological "
    "geometric algebraic probabilistic semantic syntactic lexical narrative visualized "
    "simulated calibrated decentralized centralized federated encrypted compressed quantized "
    "pretrained supervised unsupervised semi-supervised inverse forward implicit explicit"
)

# Names of papers' contributions ("Meridian cohort", "Falcon model"): real English words.
SIGNATURE_NAMES: tuple[str, ...] = _words(
    "Aurora Meridian Falcon Cedar Harbor Atlas Orion Lotus Granite Willow Beacon Summit Horizon "
    "Compass Anchor Prism Vertex Zephyr Sierra Delta Cobalt Amber Crimson Sapphire Emerald "
    "Ivory Onyx Jasper Topaz Coral Maple Aspen Birch Cypress Juniper Laurel Magnolia Oak Pine "
    "Sequoia Spruce Tamarind Hawthorn Heron Kestrel Osprey Raven Sparrow Swift Condor Pelican "
    "Albatross Lynx Panther Jaguar Cougar Badger Otter Beaver Bison Moose Caribou Gazelle Ibex "
    "Puma Marlin Dolphin Orca Narwhal Manta Triton Neptune Jupiter Saturn Mercury Vesta Juno "
    "Apollo Artemis Helios Selene Gaia Titan Phoenix Griffin Pegasus Hydra Lyra Vega Sirius "
    "Polaris Rigel Altair Deneb Antares Capella Arcturus Castor Pollux Nova Quasar Pulsar "
    "Nebula Comet Meteor Eclipse Solstice Equinox Monsoon Tempest Cyclone Glacier Tundra "
    "Savanna Canyon Mesa Fjord Lagoon Estuary Atoll Reef Dune Oasis Prairie Steppe Highland "
    "Lowland Riverside Lakeside Seaside Bayside Westbrook Eastwood Northgate Southfield Ashford "
    "Bradford Clifton Dorset Easton Fairview Glenwood Hamilton Kingston Lancaster Madison "
    "Newport Oxford Preston Richmond Salem Stratford Trenton Warwick Windsor York Lincoln "
    "Chester Durham Exeter Bristol Cambridge Hudson Potomac Columbia Shannon Danube Rhine "
    "Thames Seine Volga Nile Amazon Yukon Mosaic Lattice Tapestry Spectrum Kaleidoscope Cascade "
    "Ripple Pulse Echo Cadence Harmony Rhapsody Sonata Ballad Anthem Chorus Fable Legend Saga "
    "Odyssey Voyage Quest Pioneer Ranger Voyager Explorer Navigator Sentinel Guardian Harbinger "
    "Keystone Cornerstone Bedrock Bastion Citadel Rampart Lighthouse Lantern Torch Ember Flare "
    "Spark Blaze Frost Thistle Clover Fern Ivy Moss Sage Thyme Basil Saffron Cinnamon Ginger "
    "Nutmeg Pepper Walnut Chestnut Almond Hazel Acorn Olive Fig Plum Cherry Apricot Quince "
    "Mulberry Elder Rowan Linden Alder Poplar Sycamore Mangrove"
)

# Kinds of named contributions per field (the second word of a signature).
SIGNATURE_KINDS: dict[str, tuple[str, ...]] = {
    "Art": ("collection", "archive", "project", "exhibition", "school"),
    "Biology": ("strain", "assay", "model", "atlas", "cohort"),
    "Business": ("index", "survey", "model", "framework", "panel"),
    "Chemistry": ("catalyst", "protocol", "reagent", "method", "complex"),
    "Computer Science": ("model", "framework", "benchmark", "algorithm", "system"),
    "Economics": ("model", "index", "panel", "dataset", "survey"),
    "Engineering": ("design", "controller", "prototype", "testbed", "method"),
    "Environmental Science": ("station", "dataset", "index", "model", "transect"),
    "Geography": ("dataset", "survey", "index", "atlas", "model"),
    "Geology": ("formation", "suite", "section", "complex", "core"),
    "History": ("archive", "papers", "manuscript", "collection", "chronicle"),
    "Materials Science": ("alloy", "process", "coating", "composite", "method"),
    "Mathematics": ("conjecture", "inequality", "method", "lemma", "scheme"),
    "Medicine": ("cohort", "trial", "score", "protocol", "registry"),
    "Philosophy": ("argument", "thesis", "principle", "account", "problem"),
    "Physics": ("experiment", "model", "detector", "survey", "mechanism"),
    "Political Science": ("dataset", "index", "survey", "project", "model"),
    "Psychology": ("scale", "inventory", "paradigm", "task", "cohort"),
    "Sociology": ("survey", "study", "panel", "project", "cohort"),
}

FIRST_NAMES: tuple[str, ...] = _words(
    "James Maria Wei Anna Mohammed Elena John Yuki Ahmed Laura David Li Sofia Carlos Priya "
    "Thomas Olga Hiroshi Fatima Peter Chen Marta Daniel Ana Rajesh Julia Michael Ying Ivan Sara "
    "Kenji Lucia Robert Mei Paolo Emma Jorge Hana Andrew Nadia"
)
LAST_NAMES: tuple[str, ...] = _words(
    "Smith Wang Garcia Müller Kim Rossi Nguyen Ivanov Silva Tanaka Johnson Li Martin Chen "
    "Kowalski Novak Brown Zhang Singh Lopez Schmidt Sato Dubois Patel Horvat Jensen Cohen "
    "Yilmaz Andersson Moreau Fischer Costa Hoffmann Kumar Suzuki Petrov Rahman Bianchi Murphy "
    "Okafor Walker Liu Fernandez Weber Park Santos Ito Larsen Becker Ali"
)

_SLOT = re.compile(r"\{(\w+)\}")


def _split_terms(text: str) -> tuple[str, ...]:
    return tuple(t.strip() for t in text.split(",") if t.strip())


# Slot markers of parsed templates; generic slots hold their word tuple directly.
_T: tuple[str, ...] = ("<topic term>",)
_F: tuple[str, ...] = ("<field term>",)
_N: tuple[str, ...] = ("<number>",)
# A parsed template: literal pieces (one more than slots), slots, and per slot whether it
# follows the article "a" (turned into "an" before a vowel).
_Template = tuple[tuple[str, ...], tuple[tuple[str, ...], ...], tuple[bool, ...]]


def _parse(template: str) -> _Template:
    parts = _SLOT.split(template)
    lits = tuple(parts[0::2])
    names = parts[1::2]
    special = {"t": _T, "f": _F, "n": _N}
    slots = tuple(special[s] if s in special else GENERIC[s] for s in names)
    an = tuple(lit.endswith(" a ") or lit in ("a ", "A ") for lit in lits[:-1])
    return lits, slots, an


def _stable_int(*parts: object) -> int:
    h = hashlib.blake2b(repr(parts).encode(), digest_size=8)
    return int.from_bytes(h.digest(), "little")


@dataclass(frozen=True)
class Topic:
    """A topic of a field: its name, its own terms and the field terms it prefers."""

    field: str
    name: str
    terms: tuple[str, ...]
    field_terms: tuple[str, ...]


def _build_topics() -> tuple[Topic, ...]:
    topics = []
    for field in FIELDS:
        field_text, topic_texts = _VOCAB[field]
        fterms = _split_terms(field_text)
        for name, text in topic_texts.items():
            # Each topic prefers a fixed subset of its field's terms (topics overlap a bit).
            rnd = random.Random(_stable_int("topic-field-terms", field, name))
            topics.append(Topic(field, name, _split_terms(text), tuple(rnd.sample(fterms, 12))))
    return tuple(topics)


FIELD_TERMS: dict[str, tuple[str, ...]] = {f: _split_terms(v[0]) for f, v in _VOCAB.items()}
TOPICS: tuple[Topic, ...] = _build_topics()
GENERIC: dict[str, tuple[str, ...]] = {k: _split_terms(v) for k, v in _GENERIC.items()}
_SECTION_TEMPLATES = tuple(tuple(_parse(t) for t in sec) for sec in _SECTIONS)
_TITLE_TEMPLATES = tuple(_parse(t) for t in _TITLES)
# Abstract sentences by position: background, objective, methods..., results..., conclusion.


def section_plan(n_sent: int) -> tuple[int, ...]:
    """Section index of each sentence of an abstract with ``n_sent`` sentences."""
    if n_sent <= 1:
        return (1,)
    if n_sent == 2:
        return (1, 3)
    if n_sent == 3:
        return (0, 1, 3)
    rest = n_sent - 3  # background, objective and conclusion take one each
    n_bg_extra = rest // 5
    n_methods = (rest - n_bg_extra) // 2
    n_results = rest - n_bg_extra - n_methods
    return (0,) * (1 + n_bg_extra) + (1,) + (2,) * n_methods + (3,) * n_results + (4,)


class TextGenerator:
    """Renders titles and abstracts for papers given their topic, niche and references.

    Where a topical ``{t}`` slot takes its word from, with the default probabilities:

    - the niche's key phrases (modifier + topic term, e.g. "adaptive chemotherapy") and
      focus terms, shared by the papers of one niche;
    - the topic's terms and the field terms the topic prefers;
    - the paper's own signature (a named method, cohort or model, e.g. "Meridian cohort");
    - a cited paper's signature or niche key phrase, as real abstracts name the methods
      and concepts of the work they build on (so citing and cited papers share rare terms
      even when they sit in different niches);
    - the second field's terms, when the paper has one.

    Niche key phrases and focus terms are derived from the niche id alone, so they do not
    depend on the seed or on the order in which papers are rendered.
    """

    P_KEYPHRASE = 0.30
    P_FOCUS = 0.12
    P_TOPIC = 0.18
    P_TOPIC_FIELD = 0.08
    P_OWN_SIGNATURE = 0.05
    P_CITED = 0.17  # half a cited paper's signature, half one of its niche key phrases
    # (the rest, 0.10: the second field's terms, or topic terms when there is none)
    # Where an {f} slot takes its word from: field terms, topic terms (rest: second field).
    P_FIELD, P_FIELD_TOPIC = 0.72, 0.18
    N_FOCUS = 5
    N_KEYPHRASES = 4

    def __init__(self) -> None:
        self._niche_cache: dict[int, tuple[tuple[str, ...], tuple[str, ...]]] = {}
        self._plans = {n: section_plan(n) for n in range(1, 41)}

    def niche_terms(self, topic: int, niche: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """(key phrases, focus terms) that the papers of niche ``niche`` repeat."""
        cached = self._niche_cache.get(niche)
        if cached is None:
            tp = TOPICS[topic]
            rnd = random.Random(_stable_int("niche-terms", niche))
            pool = tp.terms + tp.field_terms
            focus = (*rnd.sample(tp.terms, 3), *rnd.sample(pool, self.N_FOCUS - 3))
            phrases = tuple(
                f"{rnd.choice(MODIFIERS)} {rnd.choice(tp.terms)}" for _ in range(self.N_KEYPHRASES)
            )
            cached = (phrases, focus)
            self._niche_cache[niche] = cached
        return cached

    @staticmethod
    def signature(topic: int, sig: int) -> str:
        """The name of a paper's contribution, e.g. "Meridian cohort" (sig: any int >= 0)."""
        kinds = SIGNATURE_KINDS[TOPICS[topic].field]
        return f"{SIGNATURE_NAMES[sig % len(SIGNATURE_NAMES)]} {kinds[(sig // 997) % len(kinds)]}"

    def render(
        self,
        rnd: random.Random,
        topic: int,
        field2: str | None,
        niche: int,
        n_sent: int,
        *,
        sig: int = 0,
        cited: tuple[tuple[int, int, int], ...] = (),
        with_abstract: bool = True,
    ) -> tuple[str, str]:
        """A (title, abstract) pair; the abstract is "" when ``with_abstract`` is false.

        ``cited`` holds (topic, niche, sig) of some papers this paper cites.
        """
        tp = TOPICS[topic]
        phrases, focus = self.niche_terms(topic, niche)
        fterms = FIELD_TERMS[tp.field]
        f2terms = FIELD_TERMS[field2] if field2 is not None else tp.terms
        own_sig = (self.signature(topic, sig),)
        cited_terms: list[str] = []
        for c_topic, c_niche, c_sig in cited:
            cited_terms.append(self.signature(c_topic, c_sig))
            cited_terms.append(rnd.choice(self.niche_terms(c_topic, c_niche)[0]))
        cited_seq = tuple(cited_terms) or phrases
        rand = rnd.random
        c1 = self.P_KEYPHRASE
        c2 = c1 + self.P_FOCUS
        c3 = c2 + self.P_TOPIC
        c4 = c3 + self.P_TOPIC_FIELD
        c5 = c4 + self.P_OWN_SIGNATURE
        c6 = c5 + self.P_CITED
        p_field = self.P_FIELD
        p_ftopic = p_field + self.P_FIELD_TOPIC
        tterms, tfterms = tp.terms, tp.field_terms

        def fill(tpl: _Template) -> str:
            lits, slots, an = tpl
            out = [lits[0]]
            for k, slot in enumerate(slots):
                if slot is _T:
                    u = rand()
                    if u < c2:
                        seq = phrases if u < c1 else focus
                    elif u < c4:
                        seq = tterms if u < c3 else tfterms
                    elif u < c6:
                        seq = own_sig if u < c5 else cited_seq
                    else:
                        seq = f2terms
                elif slot is _F:
                    u = rand()
                    seq = fterms if u < p_field else tterms if u < p_ftopic else f2terms
                elif slot is _N:
                    seq = (str(int(10 ** (1 + 2.5 * rand()))),)
                else:
                    seq = slot
                w = seq[int(rand() * len(seq))]
                if an[k] and w[0] in "aeiouAEIOU":
                    out[-1] = out[-1][:-2] + "an "
                out.append(w)
                out.append(lits[k + 1])
            text = "".join(out)
            return text[0].upper() + text[1:]

        title = fill(_TITLE_TEMPLATES[int(rand() * len(_TITLE_TEMPLATES))])
        if not with_abstract:
            return title, ""
        plan = self._plans.get(n_sent) or section_plan(n_sent)
        sentences = []
        for sec in plan:
            templates = _SECTION_TEMPLATES[sec]
            sentences.append(fill(templates[int(rand() * len(templates))]))
        return title, " ".join(sentences)


def topics_of_field() -> dict[str, list[int]]:
    """Topic indices (into :data:`TOPICS`) of each field."""
    out: dict[str, list[int]] = {f: [] for f in FIELDS}
    for i, tp in enumerate(TOPICS):
        out[tp.field].append(i)
    return out
